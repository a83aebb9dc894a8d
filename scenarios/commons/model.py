"""The commons: a fishery shared by a society, after GovSim (Piatti et al. 2024), on the contract.

Each replicate is one lake of ``population`` fishers; a step is a month. A month: (with
``communication``) every LLM fisher posts one message that its lake's fishers see -> every
fisher asks for a catch (tons; a learned policy gives a share of the equal split S/N) ->
requests beyond the stock are rationed in proportion -> the stock falls -> a lake left with
fewer than ``collapse_threshold`` tons collapses (its fishers wait, their requests ignored and
LLM fishers not asked, until the episode's last month) -> the rest regrows (logistic, or
GovSim's doubling). ``episodes`` fresh lakes are fished in sequence by the same agents
(``episodes * steps`` months); learned agents take REINFORCE steps at the end of each, every
decision credited with their catch of the episode in units of its sustainable catch.

Metrics of an episode, recorded at its last month (NaN in other months; GovSim's definitions
with continuous tons), the headline being the last episode's:

- ``survival_time``: GovSim's survival months: the month in which the lake collapsed, or
  ``steps`` if it never did (GovSim's ``compute_survival_months_stats``: round index + 1 of
  the first stock below 5 t, else 12; its paper's ``m = max{t | h(t) > C}``), so a lake that
  collapsed in its last month also scores ``steps``; ``survived`` (1 if it never collapsed:
  GovSim's collapse flag, its mean the survival rate) tells the two apart.
- ``sustainability``: 1 - over-usage, the share of positive requests, over fishers and
  months, above the per-fisher threshold f(S)/N (f: :func:`dynamics.sustainable_catch`, the
  largest total catch after which the lake regrows to its current size): GovSim's
  ``o = sum 1[r > f/N] / sum 1[r > 0]`` on what fishers asked for; a request within half a
  displayed unit (0.005 t) of the threshold is not over it; 1 when nobody asked.
- ``gini_harvest``: the Gini coefficient of the fishers' total catches (1 - GovSim's equality).
- ``efficiency``: min(1, total catch / (steps x f(initial stock))), GovSim's u.
- ``catch_per_agent``: mean total catch of a fisher (GovSim's gain, in tons).

With ``agents=mixed`` the headline also has ``sustainability.<kind>`` and
``catch_per_agent.<kind>``. Monthly rows of a living lake (NaN once it collapsed): ``stock``
before fishing, ``catch``, ``sustainable_catch``, ``over_usage``; ``agent_catch`` per fisher
at the end. Rule fishers play ``strategies`` (seats drawn per replicate). Posted messages go
to ``messages.jsonl`` in the run directory.
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from scenarios.commons import prompts
from scenarios.commons.config import RULE_STRATEGIES, CommonsConfig
from scenarios.commons.dynamics import fish, sustainable_catch
from sim_core.experiment import save_figure, subplots
from society.cohorts.rules import mix_counts
from society.fields import KINDS
from society.metrics import gini_jax
from society.population import uses_llm
from society.study import Continuous, Study

TOLERANCE = 0.005  # tons are shown with two decimals: the displayed threshold is not over it
EPISODE = ("survival_time", "sustainability", "gini_harvest", "survived", "efficiency",
           "catch_per_agent")  # fmt: skip


def _f(stock, p):
    return sustainable_catch(stock, p.capacity, p.growth_rate, doubling=p.regrowth == "doubling")


def rule(o, p):
    """A rule fisher's request (tons) by its strategy."""
    s = o["strategy"]
    asks = (
        o["sustainable_share"],
        o["equal_share"],
        p.fixed_harvest,
        p.harvest_fraction * o["stock"],
    )
    return jnp.select([s == i for i in range(3)], list(asks[:3]), asks[3])


def _history(p):
    return prompts.HISTORY_MONTHS if uses_llm(p) else 0  # only LLM fishers read it


def _lake(p):
    """A fresh lake and the episode's tallies."""
    n, h = p.population, _history(p)
    zeros = jnp.zeros(n, jnp.float32)
    return {"stock": jnp.float32(p.start_stock), "alive": jnp.bool_(True), "survival": jnp.int32(p.steps),
            "caught": zeros, "over": zeros, "positive": zeros,
            "past": jnp.zeros((h, 6)), "mine": jnp.zeros((h, n, 2)), "all": jnp.zeros((h, n))}  # fmt: skip


def _situation(fields, p):
    names = [prompts.name_of(i) for i in range(p.population)]
    me = fields["seat"]
    system = prompts.system_prompt(
        name=names[me], others=names[:me] + names[me + 1 :], capacity=p.capacity,
        growth_rate=p.growth_rate, doubling=p.regrowth == "doubling",
        collapse_threshold=p.collapse_threshold, periods=p.steps, communication=p.communication,
    )  # fmt: skip
    history = prompts.history_text(fields["past"], fields["mine"], fields["all"], me, names)
    return system, prompts.situation(
        month=fields["month"], periods=p.steps, stock=fields["stock"],
        sustainable_share=fields["sustainable_share"], universalization=p.universalization,
        history=history,
    )  # fmt: skip


def render(fields, p):
    """An LLM fisher's catch prompt: the rules, the month, the lake's history, the posts."""
    system, situation = _situation(fields, p)
    names = [(prompts.name_of(a), text) for a, text in fields["messages"]]
    posts = prompts.messages_text(names) if p.communication else None
    return system, prompts.catch_prompt(situation, posts, fields["stock"])


def talk(fields, p):
    """An LLM fisher's message prompt (before anyone fishes; none without communication)."""
    if not p.communication:
        return None
    system, situation = _situation(fields, p)
    return system, prompts.message_prompt(situation, p.message_chars)


class Commons(Study):
    """GovSim's fishery (Piatti et al. 2024) with logistic regrowth, for any kind of agent."""

    Params = CommonsConfig
    name = "commons"
    unit = "month"
    labels = {"agent": int, "cohort": str}
    actions = Continuous(0.0, lambda p: p.capacity, rule=rule)  # learned: x K, a share x of S/N
    reply = prompts.Catch
    features = ("stock_norm", "time_norm")
    render, talk = staticmethod(render), staticmethod(talk)
    reporters = {
        k: (lambda w, out, k=k: out[k])
        for k in ("stock", "catch", "sustainable_catch", "over_usage", *EPISODE)
    }
    agent_reporters = {"agent_catch": lambda w, out: w["caught"]}
    sparse = tuple(reporters)  # rows of living lakes, episode values at episodes' ends
    headline = EPISODE

    def length(p):
        return p.episodes * p.steps

    def init(key, p):
        n, counts = p.population, mix_counts(p.strategies, p.population)
        table = np.repeat([RULE_STRATEGIES.index(s) for s in counts], list(counts.values()))
        strategy = jax.random.permutation(key, jnp.asarray(table, jnp.int32))
        return {
            **_lake(p),
            "t": jnp.int32(0),
            "strategy": strategy,
            "kind": jnp.zeros(n, jnp.int32),
        }

    def observe(w, p):
        n, month = p.population, w["t"] % p.steps
        full = lambda x: jnp.full(n, x, jnp.float32)  # noqa: E731
        f = _f(w["stock"], p)
        seen = lambda x: jnp.broadcast_to(x, (n, *x.shape))  # noqa: E731 - the lake's history
        listed = w["all"] if n <= prompts.LIST_NAMES_UP_TO else w["all"][:, :0]
        return {"stock": full(w["stock"]), "sustainable_share": full(f / n), "equal_share": full(w["stock"] / n),
                "stock_norm": full(w["stock"] / p.capacity), "time_norm": full(month / p.steps),
                "month": jnp.full(n, month + 1), "seat": jnp.arange(n), "strategy": w["strategy"],
                "past": seen(w["past"]), "mine": jnp.swapaxes(w["mine"], 0, 1), "all": seen(listed)}  # fmt: skip

    def due(w, p):
        """The fishers of a living lake choose (LLM fishers are asked) and learn."""
        return jnp.broadcast_to(w["alive"], (p.population,))

    def step(key, w, act, p):
        alive, stock = w["alive"], w["stock"]
        share = _f(stock, p) / p.population
        learned = w["kind"] == KINDS.index("learned")
        asked = jnp.where(learned, act / p.capacity * (stock / p.population), act)
        asked = jnp.where(alive & jnp.isfinite(asked) & (asked > 0), asked, 0.0)
        new, still, out = fish(stock, alive, asked, p.capacity, p.growth_rate,
                               p.collapse_threshold, doubling=p.regrowth == "doubling")  # fmt: skip
        caught, month = out["caught"], w["t"] % p.steps + 1
        positive, over = asked > 0, asked > share + TOLERANCE
        lake = {**w, "stock": new, "alive": still, "caught": w["caught"] + caught,
                "over": w["over"] + over, "positive": w["positive"] + positive,
                "survival": jnp.where(out["collapsed"], month, w["survival"])}  # fmt: skip
        if _history(p):
            row = jnp.stack([month, stock, out["left"], new, caught.sum(), caught.max()])
            add = lambda h, x: jnp.where(alive, jnp.roll(h, -1, 0).at[-1].set(x), h)  # noqa: E731
            lake |= {"past": add(w["past"], row), "mine": add(w["mine"], jnp.stack([asked, caught], 1)),
                     "all": add(w["all"], caught)}  # fmt: skip
        nan = lambda x, ok=alive: jnp.where(ok, x, jnp.nan)  # noqa: E731
        end = month == p.steps
        f0 = _f(jnp.float32(p.start_stock), p)
        total = lake["caught"]
        out = {"stock": nan(stock), "catch": nan(caught.sum()), "sustainable_catch": nan(share * p.population),
               "over_usage": nan(over.sum() / jnp.maximum(positive.sum(), 1), alive & positive.any()),
               "survival_time": lake["survival"], "survived": (lake["survival"] == p.steps) & lake["alive"],
               "sustainability": 1 - lake["over"].sum() / jnp.maximum(lake["positive"].sum(), 1),
               "gini_harvest": gini_jax(total), "catch_per_agent": total.mean(),
               "efficiency": jnp.where(f0 > 0, jnp.minimum(1, total.sum() / (p.steps * f0)), jnp.nan)}  # fmt: skip
        out = {k: nan(v, end) if k in EPISODE else v for k, v in out.items()}
        unit = p.steps * jnp.where(f0 > 0, f0, p.capacity) / p.population
        out["return"] = caught / unit  # in units of a fisher's sustainable catch of an episode
        again = end & (w["t"] + 1 < p.episodes * p.steps)  # the next episode: a fresh lake
        lake = jax.tree_util.tree_map(
            lambda a, b: jnp.where(again, a, b), {**lake, **_lake(p)}, lake
        )
        return {**lake, "t": w["t"] + 1}, out

    def done(w, p):
        return w["t"] % p.steps == 0  # the step ended an episode: learned fishers learn

    reward = "return"

    def summary(w, p):
        """Per kind of agent (``agents=mixed``): sustainability and catch per agent."""
        present = (
            [k for k, c in mix_counts(p.split, p.population).items() if c]
            if p.agents == "mixed"
            else []
        )
        out = {}
        for k in present:
            mine = w["kind"] == KINDS.index(k)
            out[f"sustainability.{k}"] = 1 - (w["over"] * mine).sum() / jnp.maximum(
                (w["positive"] * mine).sum(), 1
            )
            out[f"catch_per_agent.{k}"] = (w["caught"] * mine).sum() / jnp.maximum(mine.sum(), 1)
        return out

    def plot(self, frame: pd.DataFrame, plots_dir: Path, config: CommonsConfig) -> list[Path]:
        """The stock month by month (capacity and collapse line), the catch against the
        sustainable catch, and each fisher's total catch by kind of agent."""
        if frame.empty or not (frame["metric"] == "stock").any():
            return []
        fig, axes = subplots(plots_dir, 1, 3, figsize=(14, 4), dpi=100)
        stock = frame[frame["metric"] == "stock"].dropna(subset=["value"])
        for _, rep in stock.groupby("replicate"):
            axes[0].plot(rep["time"], rep["value"], color="tab:blue", alpha=0.25, lw=0.8)
        axes[0].axhline(config.capacity, color="grey", ls=":", label="capacity")
        axes[0].axhline(config.collapse_threshold, color="tab:red", ls="--", label="collapse")
        axes[0].set(xlabel="month", ylabel="tons before fishing (living lakes)")
        for metric, colour in (("catch", "tab:orange"), ("sustainable_catch", "tab:green")):
            sub = frame[frame["metric"] == metric].groupby("time")["value"].mean()
            axes[1].plot(sub.index, sub.values, color=colour, marker="o", ms=3, label=metric)
        axes[1].set(xlabel="month", ylabel="tons per living lake (mean)")
        per = frame[frame["metric"] == "agent_catch"]
        kinds = [k for k in KINDS if (per["cohort"] == k).any()]
        axes[2].boxplot([per.loc[per["cohort"] == k, "value"] for k in kinds], tick_labels=kinds)
        axes[2].set(ylabel="total catch of a fisher, last episode (tons)")
        for ax in axes[:2]:
            ax.legend(fontsize=7, loc="best")
        fig.suptitle(
            f"commons: {config.population} fishers, {config.regrowth} regrowth, agents={config.agents}"
        )
        return [save_figure(fig, plots_dir / "commons.png")]
