"""The donor game of LLM societies (Vallinder and Hughes 2024), as in the authors' code, on the
model contract: one step is one round, a generation two games of ``steps`` rounds.

Each generation, ``population`` agents are split at random into two halves and play a game
(see :func:`dynamics.pairs`), then a second game with the halves' roles swapped; resources
and traces reset for each game. Agents are ranked by their mean final resources over the
two games; the top half survive and each survivor's strategy passes to one newcomer (its
child: rule agents the same share, learned agents the policy with noise ``mutation``, LLM
agents a new strategy written from the survivors' strategies and scores). Rule agents give
the share ``give_fraction``; learned agents a share in (0, 1), learning at each game's end
from its return; LLM agents answer in units, read as a share of what they hold. Rows are
recorded once a generation (time = generation).
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import pandas as pd

from scenarios.donor_game import prompts
from scenarios.donor_game.config import DonorGameConfig
from scenarios.donor_game.dynamics import DONATED, INVALID, PUNISHED, fresh_trace, pairs, play
from sim_core.experiment import plot_metrics
from society.fields import KINDS
from society.metrics import gini_jax
from society.study import Continuous, Study

HEADLINE = ("mean_resources", "donation_fraction", "punishment_rate")
# Resources are shown to LLM agents with two decimals, so an answer up to this much above
# what the donor holds means "all of it"; beyond it the offer is invalid (nothing moves).
DISPLAY_TOLERANCE = 0.005
REPORTS = ("mean_resources", "donation_fraction", "punishment_rate", "given_per_agent", "gini",
           "invalid_rate", *(f"{m}.{k}" for m in ("share", "mean_resources") for k in KINDS))  # fmt: skip
TALLIES = ("given", "share", "held", "punished", "invalid")  # a generation's sums over donors


def units_to_share(units, held):  # noqa: ANN001, ANN201
    """Signed units given up (negative: spent punishing) -> signed share of ``held``; more
    than ``held`` (beyond the display tolerance) is an invalid offer, returned as inf."""
    mag = jnp.abs(units)
    share = jnp.where(held > 0, jnp.minimum(mag, held) / jnp.where(held > 0, held, 1.0), 0.0)
    share = jnp.where(mag <= held + DISPLAY_TOLERANCE, share, jnp.inf)
    return jnp.where(units < 0, -share, share).astype(jnp.float32)


def clock(w, p):  # noqa: ANN001, ANN201
    """(generation, game, round) of the step about to be played, 0-based."""
    g, rest = jnp.divmod(w["t"], 2 * p.steps)
    return g, rest // p.steps, rest % p.steps


def select(key, w, g, first, final, p):  # noqa: ANN001, ANN201
    """End of a generation: its report, then the top half's children replace the others."""
    n, h = p.population, p.population // 2
    fitness = (first + final) / 2
    tally, events = w["tally"], p.steps * n  # donations of a generation: 2 games * steps * h
    of = [w["kind"] == k for k in range(len(KINDS))]
    rep = dict(zip(REPORTS, [fitness.mean(), tally["share"] / tally["held"], tally["punished"] / events,
        tally["given"] / (2 * n), gini_jax(jnp.concatenate([first, final])), tally["invalid"] / events,
        *(m.mean() for m in of), *(jnp.sum(fitness * m) / m.sum() for m in of)], strict=True))  # fmt: skip
    order = jnp.argsort(-fitness, stable=True)
    survivors, dead = order[:h], order[h:]
    last = g + 1 >= p.generations
    parent = jnp.full(n, -1, jnp.int32).at[dead].set(jnp.where(last, -1, survivors))
    born = parent >= 0
    return {**w, "report": rep, "fitness": fitness, "child_of": parent,
            "kind": jnp.where(born, w["kind"][jnp.maximum(parent, 0)], w["kind"]),
            "born": w["born"].at[dead].set(jnp.where(last, w["born"][dead], g + 2)),
            "index": w["index"].at[dead].set(jnp.where(last, w["index"][dead], jnp.arange(1, h + 1))),
            "order": jax.random.permutation(key, n).astype(jnp.int32),
            "tally": jax.tree_util.tree_map(jnp.zeros_like, tally)}  # fmt: skip


class DonorGame(Study):
    """Vallinder and Hughes (2024): cultural evolution of cooperation in the donor game."""

    Params = DonorGameConfig
    name = "donor-game"
    unit = "generation"
    labels = {"agent": int, "cohort": str}
    # a share of the donor's resources; LLM agents answer in units (step reads them, unclipped)
    actions = Continuous(0.0, 1.0, rule=lambda o, p: p.give_fraction, fallback=0.0, clip=False)
    features = ("recipient_last_given", "has_trace", "resources_norm", "recipient_resources_norm")
    system = staticmethod(lambda p: prompts.system_prompt(
        endowment=p.endowment, multiplier=p.multiplier, trace_depth=p.trace_depth,
        punishment=p.punishment, punishment_loss=p.punishment_loss))  # fmt: skip
    reply = staticmethod(
        lambda p: prompts.DonorPunishAction if p.punishment else prompts.DonorAction
    )
    persona_reply = prompts.StrategyReply
    reporters = {k: (lambda w, out, k=k: w["report"][k]) for k in REPORTS}
    sparse = tuple(f"mean_resources.{k}" for k in KINDS)  # a kind absent: no row
    headline = HEADLINE

    def length(p):
        return p.generations * 2 * p.steps

    def period(p):
        return 2 * p.steps

    def init(key, p):
        n, nan = p.population, jnp.float32(jnp.nan)
        return {"t": jnp.int32(0), "kind": jnp.zeros(n, jnp.int32), "child_of": jnp.full(n, -1, jnp.int32),
                "born": jnp.ones(n, jnp.int32), "index": jnp.arange(1, n + 1, dtype=jnp.int32),
                "order": jax.random.permutation(key, n).astype(jnp.int32),
                "resources": jnp.full(n, p.endowment, jnp.float32), "trace": fresh_trace(n, p.trace_depth),
                "first": jnp.zeros(n), "fitness": jnp.zeros(n), "report": dict.fromkeys(REPORTS, nan),
                "tally": dict.fromkeys(TALLIES, jnp.float32(0))}  # fmt: skip

    def observe(w, p):
        g, game, rnd = clock(w, p)
        partner, _ = pairs(w["order"], rnd, game, p.steps)
        trace, res = w["trace"][partner], w["resources"]
        ids = trace[:, :, 2:4].astype(jnp.int32)  # the names of the trace's donors and recipients
        names = jnp.stack([w["born"][ids], w["index"][ids]], -1).reshape(*ids.shape[:2], 4)
        last, n = trace[:, 0, 0], res.shape[0]
        return {"generation": jnp.full(n, g + 1), "round": jnp.full(n, rnd + 1), "resources": res,
                "recipient_resources": res[partner], "trace": jnp.concatenate([trace, names], -1),
                "name": jnp.stack([w["born"], w["index"]], -1),
                "recipient_name": jnp.stack([w["born"][partner], w["index"][partner]], -1),
                "recipient_last_given": jnp.where(last == DONATED, 1.0, jnp.where(last == PUNISHED, -1.0, 0.0)) * trace[:, 0, 4],
                "has_trace": ((last >= DONATED) & (last <= INVALID)).astype(jnp.float32),
                "resources_norm": res / p.endowment, "recipient_resources_norm": res[partner] / p.endowment}  # fmt: skip

    def due(w, p):
        _, game, rnd = clock(w, p)
        return pairs(w["order"], rnd, game, p.steps)[1]  # the donors

    def step(key, w, act, p):
        g, game, rnd = clock(w, p)
        partner, donor = pairs(w["order"], rnd, game, p.steps)
        res = w["resources"]
        a = jnp.where(w["kind"] == KINDS.index("llm"), units_to_share(act, res), act)
        res, trace, out = play(res, w["trace"], partner, donor, a, rnd + 1, p.multiplier,
                               p.punishment_loss, p.punishment)  # fmt: skip
        ok = out["held"] > 0
        tally = {"given": out["given"].sum(), "share": jnp.sum(jnp.where(ok, out["given"] / jnp.where(ok, out["held"], 1), 0)),
                 "held": jnp.sum(donor & ok), "punished": out["punished"].sum(), "invalid": out["invalid"].sum()}  # fmt: skip
        w = {**w, "t": w["t"] + 1, "child_of": jnp.full_like(w["child_of"], -1),
             "tally": jax.tree_util.tree_map(lambda x, y: x + y.astype(jnp.float32), w["tally"], tally)}  # fmt: skip

        def afresh(w):  # a game ends: resources and traces start afresh; a generation: selection
            w = {**w, "resources": jnp.full_like(res, p.endowment), "trace": fresh_trace(*res.shape, p.trace_depth),
                 "first": jnp.where(game == 0, res, w["first"])}  # fmt: skip
            return jax.lax.cond(
                game == 1, lambda w: select(key, w, g, w["first"], res, p), lambda w: w, w
            )

        w = jax.lax.cond(
            rnd == p.steps - 1, afresh, lambda w: w, {**w, "resources": res, "trace": trace}
        )
        return w, out

    reward = "gain"

    def done(w, p):
        return w["t"] % p.steps == 0  # a game ended: learned agents learn from its return

    def persona(world, agent, personas, p):
        """A new LLM agent's strategy request: from the rules alone in generation 1, else with
        its replicate's LLM survivors' strategies and scores, best first."""
        advice = None
        if world["t"] > 0:
            mine = [a for a in personas if world["child_of"][a] < 0]
            advice = [(f"{world['born'][a]}_{world['index'][a]}", float(world["fitness"][a]), personas[a])
                      for a in sorted(mine, key=lambda a: -world["fitness"][a])]  # fmt: skip
        return prompts.strategy_prompt(f"{world['born'][agent]}_{world['index'][agent]}", advice)

    def render(fields, p):
        name = lambda v: f"{int(v[0])}_{int(v[1])}"  # noqa: E731
        return prompts.donor_prompt(
            name=name(fields["name"]), strategy=fields["persona"], generation=int(fields["generation"]),
            round_no=int(fields["round"]), recipient=name(fields["recipient_name"]),
            recipient_resources=float(fields["recipient_resources"]), resources=float(fields["resources"]),
            trace=prompts.trace_text(fields["trace"], p.punishment_loss), multiplier=p.multiplier,
            punishment=p.punishment, punishment_loss=p.punishment_loss)  # fmt: skip

    def plot(self, frame: pd.DataFrame, plots_dir: Path, config: DonorGameConfig) -> list[Path]:
        """One PNG per per-generation metric against the generation (time = generation)."""
        if frame.empty:
            return []
        metrics = [m for m in sorted(frame["metric"].unique()) if not m.startswith("llm_")]
        return plot_metrics(frame, plots_dir, metrics)
