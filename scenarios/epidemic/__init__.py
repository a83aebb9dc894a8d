"""epidemic: SIR/SEIR epidemics with behaviour decided by rules, learned or LLM agents (see model.py)."""
