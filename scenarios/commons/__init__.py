"""commons: a common-pool resource (a fishery) harvested by a society, after GovSim (Piatti et al. 2024)."""
