"""Elo league: population-based self-play with Elo matchmaking, in the spirit of Pommerman's
league (Resnick et al. 2018) and AlphaStar's: a league of learned duellists matched by rating.

The game, a terrain duel: each of ``L`` rounds draws a terrain ``h`` of 6 that both players see;
each picks one of 4 manoeuvres; manoeuvre ``a`` is worth ``V[h, a]`` (a fixed table) and the
round's score is ``V[h, a] - V[h, b]``; the higher total wins (a tie is half a win). Winning needs
the best manoeuvre on each terrain, but an outcome only tells a player it did better than this
opponent: against a far weaker or stronger one the outcome is certain and teaches nothing.

Agents are softmax policies (logits per terrain) with their own learning rate (log-uniform,
as population-based training draws them). A step pairs the whole league, by Elo (rating plus
uniform noise of +-2 ``explore`` points, sorted, neighbours meet) or at random; each pair
plays ``games`` games; ratings move by Elo; each agent ascends REINFORCE with the Elo-expected score as baseline,
plus a dense exploration reward (the policy's entropy each round) annealed as its rating rises
above the start. Curriculum: games grow from ``rounds`` to ``max_rounds`` rounds with the
league's spread of ratings. Held-out rules (never trained against): uniform random, best move
on half the terrains, and always the second-best move; evaluated over ``max_rounds`` rounds.
"""

import math

import jax
import jax.numpy as jnp

from scenarios.elo_league.config import EloLeagueParams
from society.study import Study

V = jax.random.uniform(jax.random.PRNGKey(7), (6, 4))  # worth of each manoeuvre on each terrain
RANK = jax.nn.one_hot(jnp.argsort(-V, 1), 4)  # (terrain, k-th best, move)
RULES = jnp.log(jnp.stack([jnp.full((6, 4), 0.25),  # uniform; best move on half; second best
    jnp.where(jnp.arange(6)[:, None] % 2, 0.25, RANK[:, 0]), RANK[:, 1]]))  # fmt: skip


def draws(key, *shape):
    """Uniforms of ``shape`` (drawn flat: XLA compiles a flat draw far faster on CPU)."""
    return jax.random.uniform(key, (math.prod(shape),)).reshape(shape)


def play(u, mine, theirs, length):
    """Games from uniforms ``u (..., rounds, 3)`` between policies ``(..., 6, 4)``: terrains,
    both sides' moves, the rounds played and my outcomes (1 win, 0.5 tie, 0 loss)."""
    h = (u[..., 0] * 6).astype(jnp.int32)
    move = lambda x, v: (v[..., None] > jnp.take_along_axis(  # noqa: E731 - inverse CDF
        jnp.cumsum(jax.nn.softmax(x), -1), h[..., None], -2)[..., :3]).sum(-1)  # fmt: skip
    a, b = move(mine, u[..., 1]), move(theirs, u[..., 2])
    mask = jnp.arange(u.shape[-2]) < length
    score = (mask * (V[h, a] - V[h, b])).sum(-1)
    return h, a, b, mask, (score > 0) + 0.5 * (score == 0)


def gradient(logits, h, a, mask, advantage, bonus):
    """REINFORCE on the games' outcomes (``advantage`` per game) plus the dense exploration
    reward, the policy's entropy each round: ``logits (P, 6, 4)``, moves ``(P, games, rounds)``."""
    pi, oh = jax.nn.softmax(logits), jax.nn.one_hot(h, 6) * mask[:, None]
    weight = oh * advantage[..., None, None]
    outcome = jnp.einsum("pgrh,pgra->pha", weight, jax.nn.one_hot(a, 4))  # sum of d log pi(a)
    outcome = outcome - weight.sum((1, 2))[..., None] * pi
    explore = pi * ((pi * jnp.log(pi)).sum(-1, keepdims=True) - jnp.log(pi))  # dH / dlogits
    explore = explore * oh.sum((1, 2))[..., None]  # each round's entropy
    return (outcome + bonus[:, None, None] * explore) / advantage.shape[1]


def versus_rules(key, logits, p):
    """Each agent's win rate against the held-out rules, ``eval_games`` games per rule."""
    u = draws(key, logits.shape[0], 3, p.eval_games, p.max_rounds, 3)
    return play(u, logits[:, None, None], RULES[None, :, None], p.max_rounds)[-1].mean((1, 2))


def rank(x, y):
    """Spearman's rank correlation."""
    return jnp.corrcoef(*(jnp.argsort(jnp.argsort(v)).astype(jnp.float32) for v in (x, y)))[0, 1]


class EloLeague(Study):
    Params = EloLeagueParams
    unit = "round"
    reporters = {
        "best_vs_rules": lambda w, out: out["vs_rules"][w["rating"].argmax()],
        "mean_vs_rules": lambda w, out: out["vs_rules"].mean(),
        "rating_rank_correlation": lambda w, out: rank(w["rating"], out["vs_rules"]),
        "rating_spread": lambda w, out: w["rating"].std(),
        "game_length": lambda w, out: out["length"],
    }
    headline = ("best_vs_rules", "rating_rank_correlation", "mean_vs_rules")

    def init(key, p):
        lo, hi = jnp.log(jnp.array(p.learning_rates))
        return {"logits": p.init_scale * jax.random.normal(key, (p.league * 24,)).reshape(-1, 6, 4),
                "learning_rate": jnp.exp(lo + (hi - lo) * draws(jax.random.fold_in(key, 1), p.league)),
                "rating": jnp.full(p.league, 1000.0), "games": jnp.zeros(p.league, jnp.int32)}  # fmt: skip

    def step(key, w, actions, p):
        k_match, k_play, k_eval = jax.random.split(key, 3)
        r, lg, noise = w["rating"], w["logits"], draws(k_match, p.league)
        order = jnp.argsort(r + p.explore * 4 * (noise - 0.5) if p.matchmaking == "elo" else noise)
        i, j = order[0::2], order[1::2]
        length = jnp.minimum(p.rounds + (r.std() / 50).astype(jnp.int32), p.max_rounds)
        u = draws(k_play, p.league // 2, p.games, p.max_rounds, 3)
        h, a, b, mask, win = play(u, lg[i][:, None], lg[j][:, None], length)
        expect = 1 / (1 + 10 ** ((r[j] - r[i]) / 400))
        adv, bonus = win - expect[:, None], p.entropy * jax.nn.sigmoid((1000 - r) / 100)
        rating = r.at[i].add(p.k_factor * adv.sum(1)).at[j].add(-p.k_factor * adv.sum(1))
        both, cat = jnp.concatenate([i, j]), jnp.concatenate  # each side learns from its moves
        grad = gradient(lg[both], cat([h, h]), cat([a, b]), mask, cat([adv, -adv]), bonus[both])
        logits = lg.at[both].add(w["learning_rate"][both, None, None] * grad)
        w = {**w, "logits": logits, "rating": rating, "games": w["games"] + p.games}
        return w, {"vs_rules": versus_rules(k_eval, logits, p), "length": length}
