"""network-game: evolutionary 2-strategy games on graphs (see model.py and dynamics.py)."""
