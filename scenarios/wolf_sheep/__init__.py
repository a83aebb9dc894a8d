"""Mesa's WolfSheep benchmark model as a study."""
