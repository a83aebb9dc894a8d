"""skill-society: the flagship study of collective self-improvement through artifacts."""
