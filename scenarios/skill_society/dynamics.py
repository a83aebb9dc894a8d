"""The vectorised skill model of the task world: what rule and learned agents act on.

Every agent has a skill per domain in [0, 1]. An attempt at a task of domain ``d``
succeeds with probability ``sigmoid(slope * (skill' - difficulty))`` where ``skill'`` is
the skill helped by the best artifact the agent can see for ``d`` (quality ``q``):
``skill + strength * q * (1 - skill)``. Practice raises skill (``practice_rate``), a used
artifact teaches in proportion to its *measured* quality (its usefulness posterior mean),
unpractised skills decay (``forgetting``), and after failures (above all) agents distil
what they learned into a playbook for the domain. Each agent holds one playbook slot per
domain (true quality, usefulness posterior, the rule it states, a version counter); who
sees whose slot follows ``sharing`` over the graph, exactly as the artifact store's
policies do. Retired playbooks (used often, rarely followed by success) are cleared.

The study (``model.py``) steps one replicate's world; the functions take agents of several
replicates on one leading axis too (``replicate * n + seat``, a block-diagonal graph).
Everything here is pure: ``step(key, world, choice, p, nb, active, ids) -> (world,
outcome)``; no Python loop over agents or edges (the loop over domains in :func:`evaluate` is
over a handful).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from scenarios.skill_society.config import SkillSocietyConfig
from scenarios.skill_society.tasks import DOMAINS, TRAIN_PARAMS
from sim_core.graph import Neighbours, neighbour_argmax_at
from sim_core.state import pytree_dataclass
from society.cohorts.rules import agent_keys, agent_uniform

EST_RATE = 0.2  # rate of an agent's running estimate of its success per domain
PRICE_RATE = 0.5  # bidding: price response to unmet demand per moment
PRICE_BOUNDS = (0.25, 4.0)
MEMO_WEIGHT = 0.5  # train score: memorised instances close this share of the remaining gap
RULE_TEMPERATURE = 0.1  # rule agents: softmax temperature of the choice over estimates
OPTIMISM = 1.0  # initial success estimates: optimism makes agents try every domain before settling
N_RULES = np.array([len(TRAIN_PARAMS[d]) for d in DOMAINS], np.int32)  # training rules a domain


@pytree_dataclass
class World:
    skill: jax.Array  # (A, D) float32
    memo: jax.Array  # (A, D) memory of train instances
    est: jax.Array  # (A, D) own running success estimate
    art_q: jax.Array  # (A, D) true quality of the agent's playbook (0: none)
    art_a: jax.Array  # (A, D) usefulness posterior Beta(a, b)
    art_b: jax.Array
    art_rule: jax.Array  # (A, D) int32: index of the training rule the playbook states (-1: none)
    art_version: jax.Array  # (A, D) int32: playbooks written into the slot so far
    attempts: jax.Array  # (A, D) attempts this generation
    successes: jax.Array  # (A, D)
    price: jax.Array  # (R, D) bidding: price of a task per domain
    reused: jax.Array  # (R,) attempts that used another agent's artifact (cumulative)
    total: jax.Array  # (R,) attempts (cumulative)


@pytree_dataclass
class Outcome:
    domain: jax.Array  # (A,) int32
    success: jax.Array  # (A,) float32 (0 for inactive rows)
    reward: jax.Array  # (A,) float32
    used_other: jax.Array  # (A,) bool: used another agent's artifact


def initial_world(p: SkillSocietyConfig, replicates: int, experts: int = 0) -> World:
    """A fresh society: every agent at ``initial_skill``; the first ``experts`` seats of each
    replicate start at skill 0.9 with a playbook of quality 0.9 in every domain."""
    a, d = replicates * p.population, len(DOMAINS)
    expert = jnp.asarray((np.arange(a) % p.population) < experts)[:, None]
    skill = jnp.where(expert, 0.9, p.initial_skill) * jnp.ones((a, d), jnp.float32)
    return World(
        skill=skill.astype(jnp.float32),
        memo=jnp.zeros((a, d), jnp.float32),
        est=jnp.full((a, d), OPTIMISM, jnp.float32),
        art_q=jnp.where(expert, 0.9, 0.0) * jnp.ones((a, d), jnp.float32),
        art_a=jnp.ones((a, d), jnp.float32),
        art_b=jnp.ones((a, d), jnp.float32),
        art_rule=jnp.where(expert, 0, -1) * jnp.ones((a, d), jnp.int32),
        art_version=jnp.where(expert, 1, 0) * jnp.ones((a, d), jnp.int32),
        attempts=jnp.zeros((a, d), jnp.float32),
        successes=jnp.zeros((a, d), jnp.float32),
        price=jnp.ones((replicates, d), jnp.float32),
        reused=jnp.zeros((replicates,), jnp.float32),
        total=jnp.zeros((replicates,), jnp.float32),
    )


def measured(w: World) -> jax.Array:
    """Usefulness posterior mean of each playbook slot (0 where there is none)."""
    return jnp.where(w.art_q > 0, w.art_a / (w.art_a + w.art_b), 0.0)


def niche_of(w: World) -> jax.Array:
    """Each agent's main domain this generation (-1 before its first attempt)."""
    return jnp.where(w.attempts.sum(1) > 0, jnp.argmax(w.attempts, axis=1), -1)


def _best_per_replicate(score: jax.Array, n: int) -> jax.Array:
    """(R, D) global id of the agent with the highest ``score`` per replicate and domain."""
    a, d = score.shape
    local = jnp.argmax(score.reshape(a // n, n, d), axis=1)
    return local + (jnp.arange(a // n) * n)[:, None]


def sources(
    w: World, p: SkillSocietyConfig, nb: Neighbours, d: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """The agent whose playbook for ``d[i]`` agent ``i`` uses (the visible one of highest
    measured quality; its own on ties), and whether there is any."""
    a = d.shape[0]
    idx = jnp.arange(a)
    rep = idx // p.population
    m = measured(w)
    own = m[idx, d]
    if p.sharing == "none":
        best = idx
    elif p.sharing == "neighbours":
        cand = neighbour_argmax_at(nb, m, d)
        best = jnp.where(m[cand, d] > own, cand, idx)
    elif p.sharing == "broadcast":
        cand = _best_per_replicate(m, p.population)[rep, d]
        best = jnp.where(m[cand, d] > own, cand, idx)
    else:  # strong-to-weak: the niche's best playbook reaches the niche's weaker agents
        niche = niche_of(w)
        in_niche = niche[:, None] == jnp.arange(len(DOMAINS))
        cand = _best_per_replicate(jnp.where(in_niche, m, -1.0), p.population)[rep, d]
        ok = (niche == d) & (niche[cand] == d) & (w.est[cand, d] > w.est[idx, d])
        best = jnp.where(ok & (m[cand, d] > own), cand, idx)
    return best, w.art_q[best, d] > 0


def uniforms(key: jax.Array, ids: jax.Array, n: int) -> jax.Array:
    """(A, n) U(0, 1) draws, each a function of (key, agent id, column) only, so results do
    not depend on how replicates are batched."""
    cols = []
    for s in range((n + 1) // 2):  # two words per agent key
        keys = agent_keys(jax.random.fold_in(key, s), ids)
        cols += [agent_uniform(keys, 0), agent_uniform(keys, 1)]
    return jnp.stack(cols[:n], 1)


def gumbel(u: jax.Array) -> jax.Array:
    return -jnp.log(-jnp.log(u))


def _team_success(u: jax.Array, prob: jax.Array, p: SkillSocietyConfig) -> jax.Array:
    """One draw per team: 1 - prod_k (1 - w_k p_k), w_k = decay ** (links from the answerer)."""
    ts = p.team_size
    k = np.arange(ts)
    depth = {
        "chain": ts - 1 - k,  # each member hands on to the next; the last one answers
        "star": np.minimum(k, 1),  # the hub answers from its spokes' work
        "tree": np.floor(np.log2(k + 1)),  # a binary tree rooted at the answerer
    }.get(p.team)
    if depth is None:  # random-dag: each member 0 to (ts - 1) links away, drawn per member
        depth = jnp.floor(u[:, 1] * ts).reshape(-1, ts).at[:, 0].set(0)
    weight = p.team_decay ** jnp.asarray(depth, jnp.float32)
    team_p = 1.0 - jnp.prod(1.0 - weight * prob.reshape(-1, ts), axis=1)
    return jnp.repeat(u[::ts, 0] < team_p, ts)  # the first member's draw decides


def step(
    key: jax.Array,
    w: World,
    choice: jax.Array,
    p: SkillSocietyConfig,
    nb: Neighbours,
    active: jax.Array,
    ids: jax.Array,
) -> tuple[World, Outcome]:
    """One moment: every active agent attempts one task; returns the new world."""
    a, nd = w.skill.shape
    idx = jnp.arange(a)
    rep = idx // p.population
    r = a // p.population
    # success, team, distil, rule, then what the allocation needs (column j depends only on
    # (key, id, j), so drawing fewer columns changes nothing else)
    u = uniforms(key, ids, 4 + {"random": 1, "router": nd}.get(p.allocation, 0))
    if p.allocation == "random":
        d = jnp.minimum(jnp.floor(u[:, 4] * nd), nd - 1)
    elif p.allocation == "router":  # comparative advantage within the replicate
        mean = w.est.reshape(r, p.population, nd).mean(1)[rep]
        d = jnp.argmax(w.est - mean + 1e-3 * gumbel(u[:, 4:]), axis=1)
    else:
        d = choice
    if p.team != "none":  # a team works on its first member's domain
        d = jnp.repeat(d.reshape(-1, p.team_size)[:, 0], p.team_size)
    d = d.astype(jnp.int32)
    src, has = sources(w, p, nb, d)
    q = jnp.where(has, w.art_q[src, d], 0.0)
    # only another agent's playbook teaches; one's own helps but holds nothing new
    mq = jnp.where(has & (src != idx), measured(w)[src, d], 0.0)
    s = w.skill[idx, d]
    prob = jax.nn.sigmoid(p.slope * (s + p.artifact_strength * q * (1.0 - s) - p.difficulty))
    if p.team != "none":
        won = _team_success(u[:, :2], prob, p)
    else:
        won = u[:, 0] < prob
    act = active.astype(jnp.float32)
    succ = won.astype(jnp.float32) * act
    hot = jax.nn.one_hot(d, nd, dtype=jnp.float32) * act[:, None]
    # learning: practice, what the used artifact teaches, forgetting of the rest
    gain = p.practice_rate * (1.0 - w.skill) + p.transfer_rate * mq[:, None] * jnp.maximum(
        q[:, None] - w.skill, 0.0
    )
    decay = p.forgetting * (w.skill - p.initial_skill)
    skill = jnp.clip(w.skill + hot * gain - (act[:, None] - hot) * decay, 0.0, 1.0)
    memo = w.memo + hot * p.memorisation * (1.0 - w.memo)
    est = w.est + hot * EST_RATE * (succ[:, None] - w.est)
    # usefulness posterior of the artifacts used (scatter-add by author slot)
    used = has & active
    flat = src * nd + d
    art_a = w.art_a.ravel().at[flat].add(jnp.where(used, succ, 0.0)).reshape(a, nd)
    art_b = w.art_b.ravel().at[flat].add(jnp.where(used, 1.0 - succ, 0.0)).reshape(a, nd)
    # distillation: above all after failures; an author keeps its best playbook
    write = active & jnp.where(won, u[:, 2] < p.distil_on_success, u[:, 2] < p.distil_on_failure)
    s_new = skill[idx, d]
    q_new = jnp.clip(s_new + p.insight * (1.0 - s_new) * (1.0 - succ), 0.0, 1.0)
    rule = jnp.floor(u[:, 3] * jnp.asarray(N_RULES)[d]).astype(jnp.int32)
    new = (hot > 0) & (write & (q_new > w.art_q[idx, d]))[:, None]
    art_q = jnp.where(new, q_new[:, None], w.art_q)
    art_a = jnp.where(new, 1.0, art_a)
    art_b = jnp.where(new, 1.0, art_b)
    art_rule = jnp.where(new, rule[:, None], w.art_rule)
    version = w.art_version + new.astype(jnp.int32)
    # retirement of playbooks that rarely help
    uses = art_a + art_b - 2.0
    retire = (art_q > 0) & (uses >= p.retire_min_uses) & (art_a / (art_a + art_b) <= p.retire_below)
    art_q = jnp.where(retire, 0.0, art_q)
    art_a = jnp.where(retire, 1.0, art_a)
    art_b = jnp.where(retire, 1.0, art_b)
    art_rule = jnp.where(retire, -1, art_rule)
    # bidding: a domain's price rises while fewer agents take its tasks than arrive
    per_rep = hot.reshape(r, p.population, nd).sum(1)
    share = per_rep / jnp.maximum(per_rep.sum(1, keepdims=True), 1.0)
    price = jnp.clip(w.price * jnp.exp(PRICE_RATE * (1.0 - nd * share)), *PRICE_BOUNDS)
    reward = succ * (w.price[rep, d] if p.allocation == "bidding" else 1.0)
    other = used & (src != idx)
    world = World(
        skill=skill,
        memo=memo,
        est=est,
        art_q=art_q,
        art_a=art_a,
        art_b=art_b,
        art_rule=art_rule,
        art_version=version,
        attempts=w.attempts + hot,
        successes=w.successes + hot * succ[:, None],
        price=price,
        reused=w.reused + other.astype(jnp.float32).reshape(r, p.population).sum(1),
        total=w.total + act.reshape(r, p.population).sum(1),
    )
    return world, Outcome(domain=d, success=succ, reward=reward, used_other=other)


def evaluate(w: World, p: SkillSocietyConfig, nb: Neighbours) -> dict[str, jax.Array]:
    """Expected scores of every agent, without learning: ``train``, ``heldout`` and ``ood``
    (A,), and ``heldout_domain`` (A, D). Agents use the best artifact they can see;
    memorised instances help on train only; shifted rules and the unseen domain get
    ``ood_transfer`` of the skill (no artifact exists for the unseen domain)."""
    a, nd = w.skill.shape
    train, held, ood = [], [], []
    for dom in range(nd):  # a handful of domains
        src, has = sources(w, p, nb, jnp.full((a,), dom, jnp.int32))
        q = jnp.where(has, w.art_q[src, dom], 0.0)
        s = w.skill[:, dom]
        eff = s + p.artifact_strength * q * (1.0 - s)
        held.append(jax.nn.sigmoid(p.slope * (eff - p.difficulty)))
        memo = eff + MEMO_WEIGHT * w.memo[:, dom] * (1.0 - eff)
        train.append(jax.nn.sigmoid(p.slope * (memo - p.difficulty)))
        ood.append(jax.nn.sigmoid(p.slope * (p.ood_transfer * eff - p.difficulty)))
    unseen = jax.nn.sigmoid(p.slope * (p.ood_transfer * w.skill.mean(1) - p.difficulty))
    held_d = jnp.stack(held, 1)
    return {
        "train": jnp.stack(train, 1).mean(1),
        "heldout": held_d.mean(1),
        "ood": (jnp.stack(ood, 1).sum(1) + unseen) / (nd + 1),
        "heldout_domain": held_d,
    }


def turnover(w: World, p: SkillSocietyConfig, inherit: jax.Array) -> World:
    """A new generation in every seat: fresh skills; playbooks pass on only with ``inherit``."""
    keep = inherit.astype(bool)
    fresh = jnp.zeros_like(w.skill)
    return w.replace(
        skill=fresh + p.initial_skill,
        memo=fresh,
        est=fresh + OPTIMISM,
        art_q=jnp.where(keep, w.art_q, 0.0),
        art_a=jnp.where(keep, w.art_a, 1.0),
        art_b=jnp.where(keep, w.art_b, 1.0),
        art_rule=jnp.where(keep, w.art_rule, -1),
        attempts=fresh,
        successes=fresh,
    )
