"""Mesa's BoltzmannWealth benchmark model as a study."""
