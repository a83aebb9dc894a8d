"""Mesa's Schelling segregation benchmark model as a study."""
