"""division-of-labour: response thresholds with reinforcement (see model.py and dynamics.py)."""
