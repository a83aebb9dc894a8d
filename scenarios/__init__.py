"""The built-in studies, one sub-package each, and the Python API to run them (from
:mod:`society.registry`, which also finds installed and file studies):

    import scenarios
    result = scenarios.run("network-game", seed=1, population=1000, update="fermi")
    result.summary["metrics"], result.metrics, result.run_dir
"""

# name -> (config class, study class), as "module:attribute": each study's parameters in its
# config.py (pydantic only: `society list` and `describe` do not import jax), its model in model.py.
REGISTRY: dict[str, tuple[str, str]] = {
    # a study's package is its name with underscores: scenarios/skill_society/
    name: (
        f"scenarios.{name.replace('-', '_')}.config:{config}",
        f"scenarios.{name.replace('-', '_')}.model:{study}",
    )
    for name, config, study in [
        ("skill-society", "SkillSocietyConfig", "SkillSociety"),
        ("public-goods", "PublicGoodsConfig", "PublicGoods"),
        ("commons", "CommonsConfig", "Commons"),
        ("epidemic", "EpidemicConfig", "Epidemic"),
        ("market", "MarketConfig", "Market"),
        ("donor-game", "DonorGameConfig", "DonorGame"),
        ("indirect-reciprocity", "IndirectReciprocityConfig", "IndirectReciprocity"),
        ("division-of-labour", "DivisionOfLabourConfig", "DivisionOfLabour"),
        ("network-game", "NetworkGameConfig", "NetworkGame"),
        ("boltzmann-wealth", "BoltzmannWealthParams", "BoltzmannWealth"),
        ("schelling", "SchellingParams", "Schelling"),
        ("conformity", "ConformityParams", "Conformity"),
        ("learning-aware-ipd", "LearningAwareIPDParams", "LearningAwareIPD"),
        ("boid-flockers", "BoidFlockersParams", "BoidFlockers"),
        ("wolf-sheep", "WolfSheepParams", "WolfSheep"),
        ("elo-league", "EloLeagueParams", "EloLeague"),
        ("social-network", "SocialNetworkParams", "SocialNetwork"),
    ]
}

from society.registry import (  # noqa: E402  (after REGISTRY, which it reads)
    ENTRY_POINT_GROUP,
    config_class,
    describe,
    get,
    names,
    population_field,
    run,
    scale,
    steps_field,
    summary_line,
    sweep,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "REGISTRY",
    "config_class",
    "describe",
    "get",
    "names",
    "population_field",
    "run",
    "scale",
    "steps_field",
    "summary_line",
    "sweep",
]
