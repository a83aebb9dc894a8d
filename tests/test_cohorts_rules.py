"""RuleCohort: the classic strategies against hand-computed cases, mixes, user strategies,
determinism, state round trips and the lifecycle hooks."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from society.cohorts import BUILTINS, RuleCohort, parse_mix

KEY = jax.random.key(0)


def acts(strategy, obs, params=None, key=KEY, **kw):
    n = len(next(iter(obs.values())))
    c = RuleCohort("r", np.arange(n), strategy, params=params, **kw)
    return np.asarray(c.act(np.arange(n), {k: jnp.asarray(v) for k, v in obs.items()}, key))


def test_allc_alld_tft():
    last = [1, 0, -1, 0]
    assert acts("allc", {"partner_last": last}).tolist() == [1, 1, 1, 1]
    assert acts("alld", {"partner_last": last}).tolist() == [0, 0, 0, 0]
    # TFT opens with cooperation and copies the partner's last move.
    assert acts("tft", {"partner_last": last}).tolist() == [1, 0, 1, 0]


def test_wsls_win_stay_lose_shift():
    # T,R,P,S = 5,3,1,0 with aspiration 2: R and T are wins, P and S losses.
    obs = {"my_last": [-1, 1, 1, 0, 0], "my_last_payoff": [0.0, 3.0, 0.0, 5.0, 1.0]}
    expected = [1, 1, 0, 0, 1]  # open C; R: stay C; S: shift to D; T: stay D; P: shift to C
    assert acts("wsls", obs, params={"wsls": {"aspiration": 2.0}}).tolist() == expected
    # The aspiration may instead come per agent in the observations.
    obs_asp = {**obs, "aspiration": [2.0, 2.0, 2.0, 6.0, 0.5]}
    assert acts("wsls", obs_asp).tolist() == [1, 1, 0, 1, 0]
    with pytest.raises(ValueError, match="aspiration"):
        acts("wsls", obs)


def test_discriminators_threshold():
    image = [-2.0, -1.0, 0.0, 1.0, 3.0]
    assert acts("disc-image", {"partner_image": image}).tolist() == [0, 0, 1, 1, 1]
    got = acts("disc-image", {"partner_image": image}, params={"disc-image": {"min_image": 1}})
    assert got.tolist() == [0, 0, 0, 1, 1]
    assert acts("disc-standing", {"partner_good": [1, 0, 1]}).tolist() == [1, 0, 1]


N_STAT = 20_000


def _rate(x) -> float:
    return float(np.mean(x))


def test_gtft_generosity_rate():
    g = 0.25
    after_d = acts(
        "gtft", {"partner_last": np.zeros(N_STAT, np.int32)}, {"gtft": {"generosity": g}}
    )
    # Binomial sd sqrt(g(1-g)/N) = 0.0031; 5 sd (two-sided p ~ 6e-7) -> 0.016.
    assert abs(_rate(after_d) - g) < 0.016
    after_c = acts("gtft", {"partner_last": np.ones(N_STAT, np.int32)})
    assert after_c.all()
    # Default generosity is the Nowak-Sigmund 1/3: sd 0.0033, 5 sd -> 0.017.
    assert abs(_rate(acts("gtft", {"partner_last": np.zeros(N_STAT, np.int32)})) - 1 / 3) < 0.017


def test_random_and_threshold_rates():
    # Binomial sd at p = 0.2 is 0.0028 and at 0.5 is 0.0035; 5 sd tolerances.
    x = np.zeros(N_STAT)
    assert abs(_rate(acts("random", {"x": x}, {"random": {"p": 0.2}})) - 0.2) < 0.015
    theta = np.full(N_STAT, 2.0)
    assert abs(_rate(acts("threshold", {"stimulus": theta, "threshold": theta})) - 0.5) < 0.018
    # s = 2 theta, n = 2: s^2 / (s^2 + theta^2) = 0.8 (sd 0.0028).
    assert abs(_rate(acts("threshold", {"stimulus": 2 * theta, "threshold": theta})) - 0.8) < 0.015
    small = acts(
        "threshold",
        {"stimulus": [0.0, 1.0, 3.0], "threshold": [1.0, 0.0, 2.0]},
        {"threshold": {"steepness": 200.0}},
    )
    assert small.tolist() == [0, 1, 1]  # no stimulus never acts; a steep curve is a step


def test_missing_observation_names_it():
    with pytest.raises(ValueError, match="partner_last"):
        acts("tft", {"partner_image": [1.0]})


def test_parse_mix_exact_counts_and_errors():
    names = parse_mix("disc-image:49,alld:1", 100, np.random.default_rng(0))
    assert (names == "disc-image").sum() == 98 and (names == "alld").sum() == 2
    assert sorted(parse_mix("tft:1,alld:1,allc:1", 10, 1)).count("tft") in (3, 4)
    assert len(parse_mix("tft", 7, 0)) == 7
    # Largest remainder: 1/3 of 10 each -> 4, 3, 3 (ties go to the first).
    counts = np.unique(parse_mix("a:1,b:1,c:1", 10, 0), return_counts=True)
    assert dict(zip(*counts, strict=True)) == {"a": 4, "b": 3, "c": 3}
    a, b = parse_mix("tft:1,alld:1", 50, 3), parse_mix("tft:1,alld:1", 50, 3)
    assert (a == b).all() and not (a == parse_mix("tft:1,alld:1", 50, 4)).all()
    for bad in ["tft:x", "tft:-1", ":3", "tft:1,,alld:1", "tft:0", "tft:1,tft:2"]:
        with pytest.raises(ValueError, match="mix spec"):
            parse_mix(bad, 10, 0)
    with pytest.raises(ValueError, match="accepted"):
        RuleCohort("r", np.arange(2), parse_mix("disc:1,alld:1", 2, 0))


def test_mixed_cohort_matches_single_strategy_cohorts():
    n = 300
    strat = parse_mix("tft:1,gtft:1,wsls:1,alld:1,random:1", n, 5)
    rng = np.random.default_rng(1)
    obs = {
        "partner_last": jnp.asarray(rng.integers(-1, 2, n)),
        "my_last": jnp.asarray(rng.integers(-1, 2, n)),
        "my_last_payoff": jnp.asarray(rng.integers(0, 6, n).astype(np.float32)),
    }
    params = {"wsls": {"aspiration": 2.0}}
    mixed = np.asarray(
        RuleCohort("m", np.arange(n), strat, params=params).act(np.arange(n), obs, KEY)
    )
    for s in np.unique(strat):
        single = np.asarray(
            RuleCohort(s, np.arange(n), s, params=params).act(np.arange(n), obs, KEY)
        )
        assert (mixed[strat == s] == single[strat == s]).all(), s


def test_user_strategy_is_per_cohort():
    def generous_to_the_famous(obs, keys, params):
        return (obs["partner_image"] > params["bar"]).astype(jnp.int32)

    c = RuleCohort(
        "u",
        np.arange(4),
        ["mine", "mine", "tft", "tft"],
        strategies={"mine": generous_to_the_famous},
        params={"mine": {"bar": 2}},
    )
    obs = {
        "partner_image": jnp.array([1.0, 3.0, 0.0, 0.0]),
        "partner_last": jnp.array([1, 1, 0, 1]),
    }
    assert np.asarray(c.act(np.arange(4), obs, KEY)).tolist() == [0, 1, 0, 1]
    assert "mine" not in BUILTINS
    with pytest.raises(ValueError, match="unknown strategies"):
        RuleCohort("other", np.arange(2), "mine")
    with pytest.raises(ValueError, match="built-in"):
        RuleCohort("x", np.arange(2), strategies={"tft": generous_to_the_famous})


def test_determinism_and_batch_independence():
    n = 64
    c = RuleCohort("d", np.arange(100, 100 + n), "random")
    obs = {"x": jnp.zeros(n)}
    full = np.asarray(c.act(c.agents, obs, KEY))
    assert (full == np.asarray(c.act(c.agents, obs, KEY))).all()
    sub = np.array([150, 103, 120, 161, 100])
    got = np.asarray(c.act(sub, {"x": jnp.zeros(sub.size)}, KEY))
    assert (got == full[sub - 100]).all()
    other = np.asarray(c.act(c.agents, obs, jax.random.key(1)))
    assert not (other == full).all()


def test_varying_batch_sizes_share_one_compilation():
    from society.cohorts.rules import _decide

    c = RuleCohort("b", np.arange(1000), "random")
    c.act(np.arange(41), {"y": jnp.zeros(41)}, KEY)
    before = _decide._cache_size()
    for n in range(41, 45):  # all pad to the 44 bucket (steps of 4 between 33 and 64)
        c.act(np.arange(n), {"y": jnp.zeros(n)}, KEY)
    # Another cohort with the same strategies reuses the compiled kernel too.
    RuleCohort("b2", np.arange(50), "random").act(np.arange(42), {"y": jnp.zeros(42)}, KEY)
    assert _decide._cache_size() == before


def test_state_dict_round_trip():
    n = 40
    strat = parse_mix("gtft:1,random:1,tft:1", n, 2)
    c = RuleCohort("s", np.arange(n), strat, params={"gtft": {"generosity": 0.5}})
    c.remove([3, 4])
    sd = c.state_dict()
    json.dumps({k: v for k, v in sd.items() if not isinstance(v, np.ndarray)})
    d = RuleCohort("s", np.arange(5), "allc")
    d.load_state_dict(sd)
    obs = {"partner_last": jnp.zeros(n - 2, jnp.int32)}
    assert (np.asarray(d.act(d.agents, obs, KEY)) == np.asarray(c.act(c.agents, obs, KEY))).all()
    assert d.params["gtft"]["generosity"] == 0.5
    with pytest.raises(ValueError, match="not registered"):
        RuleCohort("s", np.arange(2)).load_state_dict({**sd, "strategy_names": ["mine"]})


def test_clone_and_remove():
    c = RuleCohort("l", np.arange(4), ["tft", "alld", "allc", "tft"])
    c.clone([1, 2], [10, 11])
    assert c.strategy_of([10, 11]).tolist() == ["alld", "allc"]
    # Mutation 1: every clone draws from the pool (the initial strategies).
    c.clone(np.zeros(200, int), np.arange(100, 300), key=KEY, mutation=1.0)
    drawn = set(c.strategy_of(np.arange(100, 300)).tolist())
    assert drawn == {"tft", "alld", "allc"}
    with pytest.raises(ValueError, match="key"):
        c.clone([0], [500], mutation=0.5)
    with pytest.raises(ValueError, match="already members"):
        c.clone([0], [1])
    c.remove([0, 10])
    assert 0 not in c.agents and len(c) == 204
    with pytest.raises(ValueError, match="not members"):
        c.act(np.array([0]), {"partner_last": jnp.zeros(1)}, KEY)
    obs = {"partner_last": jnp.zeros(3, jnp.int32)}
    assert np.asarray(c.act(np.array([1, 11, 3]), obs, KEY)).tolist() == [0, 1, 0]
    c.spawn([600, 601], strategy="alld")
    c.spawn(np.arange(700, 760), key=KEY)  # from the mutation pool
    assert c.strategy_of([600, 601]).tolist() == ["alld", "alld"]
    assert set(c.strategy_of(np.arange(700, 760)).tolist()) == {"tft", "alld", "allc"}
    with pytest.raises(ValueError, match="spawn needs"):
        c.spawn([800])
    c.set_strategy([3], "allc")
    assert np.asarray(c.act(np.array([3]), {"partner_last": jnp.zeros(1)}, KEY)).tolist() == [1]


def test_bad_input():
    with pytest.raises(ValueError, match="one name or 3 names"):
        RuleCohort("r", np.arange(3), ["tft", "alld"])
    with pytest.raises(ValueError, match="generosity"):
        RuleCohort("r", np.arange(3), "gtft", params={"gtft": {"generosity": 2.0}})
    with pytest.raises(ValueError, match="accepted"):
        RuleCohort("r", np.arange(3), "gtft", params={"gtft": {"generous": 0.2}})
    with pytest.raises(ValueError, match="leading axis"):
        RuleCohort("r", np.arange(30), "tft").act(
            np.arange(20), {"partner_last": jnp.zeros(3)}, KEY
        )
