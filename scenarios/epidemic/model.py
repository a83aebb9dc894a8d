"""The epidemic: SIR/SEIR with behaviour, on a graph or well mixed, one day a step (a Study).

Each replicate is one town of ``population`` agents. A day: every agent chooses its contact
level (clipped to [min_contact, 1]): rule agents by their ``behaviour`` (drawn per replicate
from the mix), learned agents from :data:`FEATURES` (REINFORCE on the day's reward
``-isolation_cost * (1 - w) - infection_cost * [infected today]``), LLM agents from the
situation they are told and a memory of their choices and costs (under ``llm_archetypes``
prevalences in buckets and no memory, so that agents in the same situation share one call,
as AgentTorch's archetypes) -> ``1/dt`` transmission steps of the chain (dynamics.py). With
``periods=drawn`` an agent draws its latent and infectious periods when it is infected and
changes compartment on those days.

A town whose epidemic is over (no one exposed or infectious in the morning) keeps stepping
harmlessly: nothing changes, its LLM agents are not asked, learned agents do not learn and
its rows stop (NaN reporters are no rows), so results do not depend on batching.

Rows (time = day; a day's rows at its end): ``susceptible``, ``exposed`` (SEIR), ``infectious``,
``recovered`` (shares), ``incidence`` (share infected that day), ``contact`` (mean contact
level that day, label ``kind``). Headline: ``attack_rate``, ``peak_prevalence``, ``peak_day``,
``mean_contact`` (over the days the epidemic went on), per kind ``attack_rate.<kind>`` and
``mean_contact.<kind>`` when mixed.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from scenarios.epidemic import prompts
from scenarios.epidemic.config import BEHAVIOURS, EpidemicConfig
from scenarios.epidemic.dynamics import E, I, R, S, day, make_params
from sim_core.experiment import save_figure, subplots
from sim_core.graph import neighbour_mean
from society.cohorts.rules import mix_counts
from society.fields import KINDS
from society.mix import parse_weights
from society.study import Continuous, Study
from society.topology import Topology, topology_of

HEADLINE = ("attack_rate", "peak_prevalence", "peak_day", "mean_contact")
FEATURES = ("symptomatic", "recovered_known", "local_prevalence", "global_prevalence")
COMPARTMENTS = ("susceptible", "exposed", "infectious", "recovered")


@lru_cache(maxsize=4)
def _town(topo: Topology | None, n: int):  # noqa: ANN202
    if topo is None:
        return None, np.full(n, n - 1, np.float32), None
    with jax.ensure_compile_time_eval():  # built once, maybe while tracing: concrete arrays
        nb = topo.neighbours()
    degree = np.asarray(topo.degree)
    return nb, degree.astype(np.float32), float(degree.mean())


def town(p: EpidemicConfig):
    """(neighbours, degree per agent, mean degree); well mixed: (None, N - 1 each, None)."""
    return _town(None if p.graph == "complete" else topology_of(p), p.population)


def chain(p: EpidemicConfig):
    """The chain's rates; with periods=drawn no step moves agents out of E or I (their drawn
    days do), while the infection rate is the chain's."""
    c = make_params(model=p.model, r0=p.r0, recovery_rate=p.recovery_rate,
                    incubation_rate=p.incubation_rate, symptomatic=p.symptomatic, dt=p.dt,
                    n=p.population, mean_degree=town(p)[2])  # fmt: skip
    if p.periods == "drawn":
        c = dataclasses.replace(c, p_onset=np.float32(0.0), p_recover=np.float32(0.0))
    return c


def rule(o, p):
    """A rule agent's contact level by its behaviour (none, isolate-when-sick, threshold); what
    no behaviour of the mix reads is not computed (a town's contacts' prevalence is a gather)."""
    used = {b for b, x in parse_weights(p.behaviour, BEHAVIOURS, "behaviour").items() if x > 0}
    if used == {"none"}:
        return 1.0
    high = o["prevalence_seen"] > p.threshold if "threshold" in used else False
    careful = jnp.where(
        o["symptomatic"] > 0, 0.0, jnp.where((o["behaviour"] == 2) & high, p.reduced_contact, 1.0)
    )
    return jnp.where(o["behaviour"] == 0, 1.0, careful)


def _seen(w, p):
    """The morning's symptomatic agents (known to be ill), their share among each agent's
    contacts and in the town."""
    nb = town(p)[0]
    known = ((w["health"] == I) & w["sym"]).astype(jnp.float32)
    glob = known.mean()
    return known, jnp.full_like(known, glob) if nb is None else neighbour_mean(nb, known), glob


def situation(fields, p):
    """An LLM agent's situation this morning (exact numbers, or buckets as an archetype)."""
    status = 1 if fields["symptomatic"] > 0 else 2 if fields["recovered_known"] > 0 else 0
    local, glob, deg = (fields[k] for k in ("local_prevalence", "global_prevalence", "degree"))
    if p.llm_archetypes:
        bucket = lambda x: prompts.BUCKET_TEXT[int(prompts.bucket(x))]  # noqa: E731
        local, town_, near = bucket(local), bucket(glob), "Among the people you meet regularly"
    else:
        near = prompts.contacts_phrase(int(deg))
        local, town_ = str(round(local * deg)), prompts.percent(glob)
    return prompts.situation(
        day=int(fields["day"]), status=status, contacts=near if p.graph != "complete" else None,
        local=local, town=town_, trend_code=int(prompts.trend(fields["global_change"], glob)),
    )  # fmt: skip


def prompt(p):
    """The LLM agents' prompt: a template that is a function (their memory is appended)."""
    return lambda fields: situation(fields, p)


def system(p):
    return prompts.system_prompt(
        agents=p.population, r0=p.r0, recovery_rate=p.recovery_rate,
        incubation_rate=p.incubation_rate if p.model == "SEIR" else None,
        symptomatic=p.symptomatic, isolation_cost=p.isolation_cost,
        infection_cost=p.infection_cost, min_contact=p.min_contact,
    )  # fmt: skip


def _drawn(key, w, h, s, new, p):
    """periods=drawn: the agents infected on day t draw their latent L (SEIR) and infectious D
    periods (the chain's geometric laws, in days): infectious from t + L + 1, recovered from
    t + L + D + 1; then the changes due tomorrow morning."""
    t, (k_lat, k_inf) = w["t"], jax.random.split(key)
    geometric = lambda k, rate: jax.random.geometric(k, -np.expm1(-rate), h.shape, jnp.int32)  # noqa: E731
    lat = geometric(k_lat, p.incubation_rate) if p.model == "SEIR" else 0
    onset = jnp.where(new, t + lat + 1, w["onset"])
    recover = jnp.where(new, onset + geometric(k_inf, p.recovery_rate), w["recover"])
    h = jnp.where((h == E) & (onset == t + 1), I, h)
    h = jnp.where((h == I) & (recover == t + 1), R, h)
    return h, s, new, {"onset": onset, "recover": recover}


class Epidemic(Study):
    """SIR/SEIR with behaviour (AgentTorch-style LLM archetypes, rules or learned policies)."""

    Params = EpidemicConfig
    name = "epidemic"
    unit = "day"
    labels = {"kind": str, "cohort": str}
    actions = Continuous(0.0, 1.0, rule=rule, fallback=1.0)  # the day's contact level
    reply = prompts.ContactChoice
    features = FEATURES
    prompt, system = staticmethod(prompt), staticmethod(system)
    reporters = {
        **{c: (lambda w, out, i=i: out["shares"][i]) for i, c in enumerate(COMPARTMENTS)},
        "incidence": lambda w, out: out["incidence"],
        "contact": lambda w, out: out["contact"],
    }
    axes = {"contact": ("kind",)}
    axis_labels = {"kind": KINDS}
    sparse = (*COMPARTMENTS, "incidence")  # no rows once a town's epidemic is over
    headline = HEADLINE

    def init(key, p):
        n, (k_seed, k_sym, k_mix, k_period) = p.population, jax.random.split(key, 4)
        seeds = jax.random.choice(k_seed, n, (p.seeds(),), replace=False)
        sym = jax.random.uniform(k_sym, seeds.shape) < p.symptomatic
        counts = mix_counts(p.behaviour, n)
        mix = np.repeat([BEHAVIOURS.index(b) for b in counts], list(counts.values()))
        w = {"health": jnp.full(n, S, jnp.int8).at[seeds].set(I),
             "sym": jnp.zeros(n, bool).at[seeds].set(sym),
             "behaviour": jax.random.permutation(k_mix, jnp.asarray(mix, jnp.int8)),
             "kind": jnp.zeros(n, jnp.int8), "contact": jnp.zeros(n, jnp.float32),
             "prev_global": jnp.float32(jnp.nan), "days": jnp.int32(0), "t": jnp.int32(0),
             "peak": jnp.float32(p.seeds() / n), "peak_day": jnp.int32(0)}  # fmt: skip
        if p.periods == "drawn":  # the seeds are infectious already: as if infected on day -1
            q = -np.expm1(-p.recovery_rate)
            infectious = jax.random.geometric(k_period, q, (n,), jnp.int32)
            w |= {"onset": jnp.full(n, -1, jnp.int32),
                  "recover": jnp.where(w["health"] == I, infectious, -1)}  # fmt: skip
        return w

    def observe(w, p):
        known, local, glob = _seen(w, p)
        full = lambda x: jnp.full(p.population, x, jnp.float32)  # noqa: E731
        change = glob - jnp.where(jnp.isnan(w["prev_global"]), glob, w["prev_global"])
        return {"symptomatic": known, "recovered_known": ((w["health"] == R) & w["sym"]).astype(jnp.float32),
                "local_prevalence": local, "global_prevalence": full(glob), "global_change": full(change),
                "prevalence_seen": local if p.prevalence_signal == "local" else full(glob),
                "behaviour": w["behaviour"], "day": full(w["t"]), "degree": jnp.asarray(town(p)[1])}  # fmt: skip

    def due(w, p):
        """Agents choose (LLM agents are asked) and learn while their town's epidemic goes on."""
        return jnp.broadcast_to(((w["health"] == E) | (w["health"] == I)).any(), (p.population,))

    def step(key, w, act, p):
        h0, s0, t = w["health"], w["sym"], w["t"]
        active = ((h0 == E) | (h0 == I)).any()
        glob = _seen(w, p)[2]
        contact = jnp.clip(jnp.nan_to_num(act, nan=1.0), p.min_contact, 1.0).astype(jnp.float32)
        k_day, k_periods = jax.random.split(key)

        def today(_):
            h, s, new = day(chain(p), town(p)[0], k_day, h0, s0, contact)
            return (h, s, new, {}) if p.periods != "drawn" else _drawn(k_periods, w, h, s, new, p)

        same = {k: w[k] for k in ("onset", "recover") if k in w}
        h, s, new, periods = jax.lax.cond(
            active, today, lambda _: (h0, s0, jnp.zeros_like(s0), same), None
        )
        prevalence = (h == I).mean(dtype=jnp.float32)
        higher = active & (prevalence > w["peak"])
        w = {**w, **periods, "health": h, "sym": s, "t": t + 1, "days": w["days"] + active,
             "prev_global": jnp.where(active, glob, w["prev_global"]),
             "contact": w["contact"] + jnp.where(active, contact, 0.0),
             "peak": jnp.where(higher, prevalence, w["peak"]),
             "peak_day": jnp.where(higher, t + 1, w["peak_day"])}  # fmt: skip
        mine = [w["kind"] == k for k in range(len(KINDS))]  # a kind absent: 0 / 0, no row
        by_kind = (
            jnp.stack([(contact * m).sum() / m.sum() for m in mine])
            if p.agents == "mixed"  # else one kind: its mean, NaN for the others
            else jnp.full(len(KINDS), jnp.nan).at[KINDS.index(p.agents)].set(contact.mean())
        )
        shares = jnp.stack([(h == c).mean(dtype=jnp.float32) for c in (S, E, I, R)])
        shares = shares.at[1].set(shares[1] if p.model == "SEIR" else jnp.nan)
        nan = lambda x: jnp.where(active, x, jnp.nan)  # noqa: E731
        return w, {"shares": nan(shares), "incidence": nan(new.mean(dtype=jnp.float32)),
                   "contact": nan(by_kind),
                   "reward": -p.isolation_cost * (1 - contact) - p.infection_cost * new}  # fmt: skip

    reward = "reward"

    def cohort_options(p):
        """Archetypes: no memory, so that agents in one situation share a call (llm_samples
        replies each); otherwise every agent remembers and draws its own reply."""
        samples, memory = (p.llm_samples, 0) if p.llm_archetypes else (p.population, p.llm_memory)
        return {"llm": {"memory_size": memory, "samples": samples}}

    def summary(w, p):
        ever, days = w["health"] != S, jnp.maximum(w["days"], 1)
        out = {"attack_rate": ever.mean(), "peak_prevalence": w["peak"], "peak_day": w["peak_day"],
               "mean_contact": w["contact"].sum() / (days * p.population)}  # fmt: skip
        for k, kind in enumerate(KINDS if p.agents == "mixed" else ()):
            mine = w["kind"] == k  # a kind absent: NaN
            out[f"attack_rate.{kind}"] = (ever & mine).sum() / mine.sum()
            out[f"mean_contact.{kind}"] = (w["contact"] * mine).sum() / (days * mine.sum())
        return out

    def plot(self, frame: pd.DataFrame, plots_dir: Path, config: EpidemicConfig) -> list[Path]:
        """One figure: compartments over time, daily incidence, and contact level by kind
        (means over replicates, each replicate faint)."""
        if frame.empty:
            return []
        frame = frame[frame["replicate"] >= 0]
        fig, axes = subplots(plots_dir, 1, 3, figsize=(14, 4), dpi=100)
        colours = dict(
            zip(COMPARTMENTS, ("tab:blue", "tab:orange", "tab:red", "tab:green"), strict=True)
        )
        for name in COMPARTMENTS:
            sub = frame[frame["metric"] == name]
            if sub.empty:
                continue
            mean = sub.groupby("time")["value"].mean()
            axes[0].plot(mean.index, mean.values, color=colours[name], label=name)
        axes[0].set(
            xlabel="day", ylabel="share of agents", title=f"{config.model} on {config.graph}"
        )
        axes[0].legend(fontsize=8)
        sub = frame[frame["metric"] == "incidence"]
        for _, rep in sub.groupby("replicate"):
            axes[1].plot(rep["time"], rep["value"], color="tab:red", alpha=0.3, lw=0.8)
        axes[1].set(xlabel="day", ylabel="share newly infected", title="daily incidence")
        sub = frame[frame["metric"] == "contact"]
        for kind, part in sub.groupby("kind"):
            mean = part.groupby("time")["value"].mean()
            axes[2].plot(mean.index, mean.values, label=str(kind))
        axes[2].set(
            xlabel="day", ylabel="mean contact level", title="behaviour by kind", ylim=(-0.05, 1.05)
        )
        axes[2].legend(fontsize=8)
        return [save_figure(fig, plots_dir / "epidemic.png")]
