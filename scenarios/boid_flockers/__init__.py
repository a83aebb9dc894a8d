"""Mesa's BoidFlockers benchmark model as a study."""
