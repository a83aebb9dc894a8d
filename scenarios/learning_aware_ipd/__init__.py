"""Learning with opponent-learning awareness (Foerster et al. 2018) in the iterated prisoner's dilemma."""
