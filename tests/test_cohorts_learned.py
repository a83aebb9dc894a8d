"""LearnedCohort: each learning rule improves what it should, vectorised over agents; plus
determinism, batch independence, state round trips and the lifecycle hooks.

Most tests use the same 64-agent bandit configuration so that compiled kernels are shared
(JIT compilation dominates the run time of this file).
"""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from society.cohorts import LearnedCohort
from society.topology import make_topology

N = 64
KEY = jax.random.key(0)


def bandit(n: int = N, **kw) -> LearnedCohort:
    return LearnedCohort("b", np.arange(n), actions=2, **kw)


def p_arm1(params) -> np.ndarray:
    """Probability of arm 1 for a featureless policy (its output bias)."""
    return np.asarray(jax.nn.softmax(params[0]["b"], axis=-1)[..., 1])


def run(cohort: LearnedCohort, steps: int, reward, obs=None, key=KEY) -> list[float]:
    """Act and learn ``steps`` times on all agents; returns the mean reward of each step."""
    means = []
    for _ in range(steps):
        key, k_act, k_env = jax.random.split(key, 3)
        a = cohort.act(cohort.agents, obs, k_act)
        r = reward(a, k_env)
        cohort.learn(cohort.agents, obs, a, r, k_env)
        means.append(float(jnp.mean(r)))
    return means


def test_reinforce_each_agent_learns_its_own_bandit():
    c = bandit(rule="reinforce", learning_rate=0.05)
    best = jnp.asarray(np.arange(N) % 2)  # half the agents have arm 1 better, half arm 0

    def reward(a, k):  # means 1.0 vs 0.5, noise sd 0.5
        return jnp.where(a == best, 1.0, 0.5) + 0.5 * jax.random.normal(k, a.shape)

    run(c, 100, reward)
    p1 = p_arm1(c.state["params"])
    p_best = np.where(np.arange(N) % 2 == 1, p1, 1 - p1)
    # All start at p = 0.5 exactly. A learner without signal drifts either way (50% each,
    # sd 6% over 64 agents); 90% on the better arm is > 6 sd above that. (Seeded: 100%.)
    assert (p_best > 0.5).mean() >= 0.9
    assert p_best.mean() > 0.8


def mlp(**kw) -> LearnedCohort:
    return LearnedCohort("c", np.arange(N), actions="continuous", features=["x"], hidden=(4,), **kw)


OBS = {"x": jnp.ones(N)}


def test_reinforce_continuous_mlp_moves_towards_target():
    c = mlp(learning_rate=0.05)
    obs = OBS
    means = run(c, 100, lambda a, k: -((a - 0.8) ** 2), obs)
    a = np.concatenate([np.asarray(c.act(c.agents, obs, jax.random.key(i))) for i in range(4)])
    # Start: mean action ~0.5 (reward ~ -0.13). The mean of 256 draws has sd < 0.02, so > 0.7
    # is a real move towards 0.8, and the reward must have risen well above its start.
    assert a.mean() > 0.7
    assert np.mean(means[-10:]) > np.mean(means[:10]) + 0.05


def test_es_improves_centre_policy():
    c = bandit(rule="es", sigma=0.5, es_learning_rate=0.1, evolve_every=5)
    assert p_arm1(c.center["params"]) == pytest.approx(0.5)
    means = run(c, 100, lambda a, k: (a == 1).astype(jnp.float32))
    # 20 generations of 64 samples; seeded outcome 0.97. A random walk of the centre would
    # end near 0.5; 0.8 needs a consistent gradient sign.
    assert p_arm1(c.center["params"]) > 0.8
    assert np.mean(means[-10:]) > np.mean(means[:10]) + 0.2


def test_ga_improves_mean_fitness():
    c = mlp(rule="ga", mutation=0.1, crossover=0.5, evolve_every=4)
    means = run(c, 80, lambda a, k: -((a - 0.8) ** 2), OBS)
    # Start ~ -0.13 (actions spread around 0.5); the seeded run ends ~ -0.02. A margin of
    # 0.05 is ~10x the sd of a 10-step mean of 64 agents' rewards (~0.005).
    assert np.mean(means[-10:]) > np.mean(means[:10]) + 0.05


def test_social_learning_spreads_fitter_policy_on_ring():
    nb = make_topology("ring", N).neighbours()
    c = bandit(rule="social", beta=10.0, mutation=0.0, neighbours=nb, evolve_every=4)
    b = np.zeros((N, 2), np.float32)
    b[:, 1] = -2.0  # everyone prefers arm 0 (p(arm 1) = 0.12) ...
    b[0, 1] = 2.0  # ... except agent 0 (0.88); reward = 1 for arm 1
    c.state["params"][0]["b"] = jnp.asarray(b)
    run(c, 4 * 30, lambda a, k: (a == 1).astype(jnp.float32))
    good = p_arm1(c.state["params"]) > 0.5
    # Each round a frontier agent copies its good neighbour with probability ~1/2 (it picks
    # that side) x ~1 (Fermi, beta * gap ~ 7); two frontiers -> ~1 new agent per round,
    # ~30 expected after 30 rounds (seeded: 30). >= 12 leaves a wide margin; copies are exact.
    assert good.sum() >= 12
    assert set(np.round(np.asarray(c.state["params"][0]["b"][:, 1]), 4)) <= {2.0, -2.0}


def test_social_copies_only_cohort_members():
    nb = make_topology("ring", 2 * N).neighbours()  # the other half of the ring is not ours
    c = LearnedCohort(
        "s",
        np.arange(0, 2 * N, 2),
        actions=2,
        rule="social",
        beta=50.0,
        mutation=0.0,
        neighbours=nb,
    )
    before = np.asarray(c.state["params"][0]["b"])
    c.evolve(KEY, fitness=np.arange(N, dtype=np.float32))
    assert (np.asarray(c.state["params"][0]["b"]) == before).all()  # no neighbour is a member


def test_sampling_follows_the_policy():
    n = 20_000
    d = LearnedCohort("d", np.arange(n), actions=3)
    probs = np.array([0.2, 0.5, 0.3])
    d.state["params"][0]["b"] = jnp.tile(jnp.log(jnp.asarray(probs, jnp.float32)), (n, 1))
    freq = np.bincount(np.asarray(d.act(d.agents, None, KEY)), minlength=3) / n
    # Multinomial sd <= sqrt(0.25 / n) = 0.0035 per class; 5 sd -> 0.018.
    np.testing.assert_allclose(freq, probs, atol=0.018)
    c = LearnedCohort("c", np.arange(n), actions="continuous")
    c.state["params"][0]["b"] = jnp.tile(jnp.asarray([0.3, np.log(0.5)], jnp.float32), (n, 1))
    z = np.log(np.asarray(c.act(c.agents, None, KEY), np.float64))
    z -= np.log1p(-np.exp(z))  # logit(a) ~ N(0.3, 0.5^2)
    # Mean: sd 0.5 / sqrt(n) = 0.0035, 5 sd -> 0.018; sd of the sample sd ~ 0.5 / sqrt(2n) =
    # 0.0025, 5 sd -> 0.013.
    assert abs(z.mean() - 0.3) < 0.018 and abs(z.std() - 0.5) < 0.013


def test_mutation_noise_is_standard_normal():
    from society.cohorts.learned import _box_muller, _uniforms

    x = np.asarray(_box_muller(_uniforms(KEY, (20_000, 4)), 3), np.float64)
    # Per column: mean sd 1/sqrt(n) = 0.007, 5 sd -> 0.035; std sd ~ 0.005, 5 sd -> 0.025;
    # correlations (the cos and sin halves of one pair included) sd 0.007 -> 0.035.
    assert np.abs(x.mean(axis=0)).max() < 0.035 and np.abs(x.std(axis=0) - 1).max() < 0.025
    assert np.abs(np.corrcoef(x.T) - np.eye(3)).max() < 0.035


def test_determinism_and_batch_independence():
    for c, obs_of in [
        (bandit(key=3), lambda n: None),
        (mlp(key=3), lambda n: {"x": jnp.ones(n)}),
    ]:
        full = np.asarray(c.act(c.agents, obs_of(N), KEY))
        assert (full == np.asarray(c.act(c.agents, obs_of(N), KEY))).all()
        sub = np.array([40, 3, 17, 63, 0])
        assert (np.asarray(c.act(sub, obs_of(sub.size), KEY)) == full[sub]).all()
        assert not (np.asarray(c.act(c.agents, obs_of(N), jax.random.key(1))) == full).all()


def test_an_agents_initial_policy_does_not_depend_on_the_cohort_size():
    """A replicate batch of one gives one-agent cohorts: their draws must match larger ones."""
    leaves = {
        n: jax.tree_util.tree_leaves(
            LearnedCohort("l", np.arange(n), features=["a", "b"], key=7).state
        )
        for n in (1, 2, 37)
    }
    for n in (1, 2):
        for small, large in zip(leaves[n], leaves[37], strict=True):
            np.testing.assert_array_equal(np.asarray(small), np.asarray(large)[:n])


def test_learning_a_subset_touches_only_those_agents():
    c = bandit(rule="reinforce")
    before = np.asarray(c.state["params"][0]["b"])
    due = np.array([5, 9, 30])  # padded to a bucket of 16: the padding must be dropped
    a = c.act(due, None, KEY)
    c.learn(due, None, a, jnp.ones(3), KEY)
    after = np.asarray(c.state["params"][0]["b"])
    changed = np.flatnonzero((after != before).any(axis=1))
    assert changed.tolist() == due.tolist()
    assert c.fitness()[due].tolist() == [1.0, 1.0, 1.0] and c.fitness().sum() == 3.0


def test_state_dict_round_trip():
    c = bandit(rule="reinforce")
    run(c, 5, lambda a, k: a.astype(jnp.float32))
    sd = c.state_dict()
    json.dumps({k: v for k, v in sd.items() if not isinstance(v, np.ndarray)})
    d = bandit(rule="reinforce", key=9)
    d.load_state_dict(sd)
    assert (np.asarray(d.act(d.agents, None, KEY)) == np.asarray(c.act(c.agents, None, KEY))).all()
    # The optimiser state came along: one more identical step gives identical parameters.
    for x in (c, d):
        x.learn(x.agents, None, jnp.ones(N, jnp.int32), jnp.ones(N), KEY)
    np.testing.assert_array_equal(
        np.asarray(d.state["params"][0]["b"]), np.asarray(c.state["params"][0]["b"])
    )
    with pytest.raises(ValueError, match="config"):
        c.load_state_dict({**sd, "config": {**sd["config"], "hidden": [3]}})

    e = bandit(rule="es", sigma=0.5, es_learning_rate=0.1)  # as in the ES test: shared compilations
    f = bandit(rule="es", sigma=0.5, es_learning_rate=0.1, key=5)
    f.load_state_dict(e.state_dict())
    for x in (e, f):
        x.evolve(KEY, fitness=np.linspace(0, 1, N))
    np.testing.assert_array_equal(
        np.asarray(f.center["params"][0]["b"]), np.asarray(e.center["params"][0]["b"])
    )


def test_clone_and_remove():
    c = bandit(rule="reinforce")
    run(c, 3, lambda a, k: a.astype(jnp.float32))
    c.clone([1, 2], [100, 101])
    rows = jax.tree_util.tree_leaves(c.state)
    src, new = c.local(np.array([1, 2])), c.local(np.array([100, 101]))
    for leaf in rows:  # parameters, optimiser state and baseline are all inherited
        np.testing.assert_array_equal(np.asarray(leaf)[new], np.asarray(leaf)[src])
    c.clone([1], [200], key=KEY, mutation=0.5)
    diff = (
        np.asarray(c.state["params"][0]["b"])[c.local(np.array([200]))]
        - np.asarray(c.state["params"][0]["b"])[src[:1]]
    )
    assert np.abs(diff).max() > 0.01
    with pytest.raises(ValueError, match="key"):
        c.clone([1], [300], mutation=0.1)
    keep = np.array([0, 3, 100])
    before = np.asarray(c.act(keep, None, KEY))
    c.remove([1, 2, 200])
    assert len(c) == N + 2 - 2 and 1 not in c.agents
    assert (np.asarray(c.act(keep, None, KEY)) == before).all()  # the others are untouched
    with pytest.raises(ValueError, match="not members"):
        c.act(np.array([1]), None, KEY)
    c.spawn([400, 401], key=KEY)  # fresh: zero biases, fresh optimiser state
    fresh = c.local(np.array([400, 401]))
    assert (np.asarray(c.state["params"][0]["b"])[fresh] == 0).all()
    assert (np.asarray(c.state["opt"][0].count)[fresh] == 0).all()
    with pytest.raises(ValueError, match="already members"):
        c.spawn([400], key=KEY)


def test_bad_input():
    with pytest.raises(ValueError, match="actions"):
        LearnedCohort("x", np.arange(3), actions=1)
    with pytest.raises(ValueError, match="rule"):
        LearnedCohort("x", np.arange(3), rule="sgd")
    with pytest.raises(ValueError, match="at most one population rule"):
        LearnedCohort("x", np.arange(3), rule=["ga", "social"])
    with pytest.raises(ValueError, match="'es' cannot be combined"):
        LearnedCohort("x", np.arange(3), rule=["reinforce", "es"])
    with pytest.raises(ValueError, match="learning_rate"):
        LearnedCohort("x", np.arange(3), learning_rate=-1.0)
    c = bandit(rule="reinforce")
    with pytest.raises(ValueError, match="no population rule"):
        c.evolve(KEY)
    with pytest.raises(ValueError, match="one row per agent"):
        c.learn(c.agents, None, jnp.ones(N, jnp.int32), jnp.ones(3), KEY)
    with pytest.raises(ValueError, match="needs neighbours"):
        bandit(rule="social").evolve(KEY)
    with pytest.raises(ValueError, match="lack features"):
        mlp(learning_rate=0.05).act(np.arange(3), {"y": jnp.ones(3)}, KEY)
    with pytest.raises(ValueError, match="fitness must have shape"):
        bandit(rule="ga").evolve(KEY, fitness=np.ones(3))
