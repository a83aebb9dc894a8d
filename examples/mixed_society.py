"""A mixed society in one world: rule, learned and LLM agents play a giving game.

    python examples/mixed_society.py

The LLM agents talk to the scriptable test server (a stand-in for any OpenAI-compatible
server; pass a real one with LLMConfig(model=..., api_base=...) or use the local model).
"""

import asyncio
import json
import os

import jax
import numpy as np
from pydantic import BaseModel, Field

from sim_core.scheduler import Scheduler
from society.cohorts import LearnedCohort, LLMCohort, RuleCohort
from society.llm import LLMClient, LLMConfig
from society.llm.testserver import TestServer
from society.population import Population


class Give(BaseModel):
    give: int = Field(ge=0, le=1, description="1 to give your partner 3 coins at a cost of 1")


def reciprocator(body: dict) -> str:  # the "model": gives back what it last received
    return json.dumps(
        {"give": 0 if "partner last gave: 0" in body["messages"][-1]["content"] else 1}
    )


async def main(rounds: int = 20) -> None:
    async with TestServer(reply=reciprocator) as srv:
        config = LLMConfig(model="openai/test-model", api_base=srv.url + "/v1")
        async with LLMClient(config) as client:
            n = 1000
            pop = Population(
                [
                    RuleCohort("rules", np.arange(900), ["tft", "alld", "allc"] * 300),
                    LearnedCohort("learned", np.arange(900, 990), features=["partner_last"], key=1),
                    LLMCohort(
                        "llm",
                        np.arange(990, n),
                        client,
                        schema=Give,
                        fallback=Give(give=0),
                        template="Round {round}. Your partner last gave: {partner_last}. Give?",
                    ),
                ]
            )
            last, score = np.full(n, -1), np.zeros(n)
            rng = np.random.default_rng(0)
            sim = Scheduler()

            async def round_() -> None:
                t = int(sim.now)
                partner = rng.permutation(n)
                obs = {"partner_last": last[partner], "round": np.full(n, t)}
                key = jax.random.fold_in(jax.random.key(0), t)
                gave = np.asarray(await pop.act(np.arange(n), obs, key)).round().astype(int)
                received = np.zeros(n)
                np.add.at(received, partner, 3 * gave)
                reward = received - gave
                pop.learn(np.arange(n), obs, gave, reward, key)
                last[:] = gave
                score[:] += reward

            sim.every(1.0, round_, start=1.0)
            await sim.arun(until=float(rounds))
            for c in pop.cohorts:
                mine = pop.cohort_of == pop.cohorts.index(c)
                print(f"{c.name:>8}: {mine.sum():4d} agents, mean score {score[mine].mean():6.2f}")
            total = client.usage.total
            print(
                f"LLM: {total['requests']:.0f} requests served by {total['network_calls']:.0f} "
                f"calls ({total['dedupe_saved']:.0f} identical prompts deduplicated)"
            )


if __name__ == "__main__":
    asyncio.run(main(rounds=3 if os.environ.get("SOCIETY_EXAMPLE_SMALL") == "1" else 20))
