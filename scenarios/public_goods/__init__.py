"""Public goods games on networks: contributions, punishment and reward (Fehr & Gächter 2000;
Santos, Santos & Pacheco 2008), with rule, learned and LLM agents."""
