"""An agent social network (after Moltbook and OASIS) with Muchnik et al. 2013's herding test.

Posts live in a ring buffer of ``posts_per_agent * population`` slots (author, topic, parent,
reply depth, likes, author's stance, time, treated); post ``s`` (a serial number) sits in
slot ``s % capacity`` until overwritten. Each agent has an interest (a topic), a stance in
[-1, 1], a follow list of ``FOLLOWS`` slots (the oldest replaced when full) and the serial
of its latest post. The recommender ranks, per agent, the latest posts of its followees and
``candidates`` random posts (one per equal stratum), all written since its last visit (never
its own), and keeps the top ``FEED`` by ``recency`` (newest), ``popularity`` ((likes + 1) /
(age + 2)^1.5, Hacker News' gravity) or ``interest`` (on the reader's topic, then newest):
O(agents * (FOLLOWS + candidates)^2) compares, no sort, never over all posts.

A step: each agent visits its feed with chance ``activity`` (LLM agents are asked only then;
any agent that acts has visited) and reads one of its posts at random; a rule agent likes it
with chance ``like_rate * m * a * (1 + herding * log(1 + likes))`` (m: 1 on its topic,
``off_topic`` off it; a = 1 - |stance gap| / 2), else replies
(``reply_rate * m``), else follows its author (``follow_rate * m * a``), else posts on its
interest (``post_rate``). LLM and learned agents choose among the same actions from the same
feed; they also write: the text of a post or reply is published to the replicate's artifact
store on its topic, and before its turn an LLM agent reads the newest three on its interest.
A like pulls the liker's stance ``influence`` of the way to the post's, and with chance
``drift`` moves its interest to the post's topic; a reply to a post ``tolerance`` or more
away pushes it as far away. A reply is a post on its parent's topic, one level deeper. A
share ``treatment`` of new posts start with one like (Muchnik's up-treatment).

Reported each step: ``herd_effect``, organic likes of treated over control posts at least
``MATURE`` steps old, minus 1 (Muchnik et al. 2013: +0.25); ``thematic_diversity``, entropy
of the step's new posts' topics over log(topics); ``mean_depth`` and ``max_depth`` of reply
threads; ``polarisation``, the variance of stances (1/3 at first, 1 when split at +-1);
``cross_follows``, the share of follow edges between opposite stances; ``posts`` written and
``follows`` per agent; with LLM agents, ``lexical_diversity`` of the step's post texts (MATTR,
``society.metrics.lexical_diversity``) and ``artifacts``, the texts so far. Tests and
tolerances: tests/test_social_network.py.
"""

from typing import Literal

import jax
import jax.numpy as jnp
from pydantic import BaseModel, Field

from scenarios.social_network.config import SocialNetworkParams
from society.study import Discrete, Study

FEED, FOLLOWS, MATURE = 5, 8, 10  # posts in a feed, follow-list width, steps to a final score
SKIP, POST, LIKE, REPLY, FOLLOW = 0, 1, 2, 2 + FEED, 2 + 2 * FEED
SLOTS = range(1, FEED + 1)
CHOICES = ("skip", "post", *(f"{a} {i}" for a in ("like", "reply", "follow") for i in SLOTS))


def act(o, p):
    """One rule agent's action from its observation (its feed and its draws)."""
    topic, likes, stance = (
        jnp.stack([o[f"{f}{i}"] for i in SLOTS]) for f in ("topic", "likes", "stance")
    )
    n = (topic >= 0).sum()
    j = jnp.minimum((o["u1"] * n).astype(jnp.int32), jnp.maximum(n - 1, 0))
    m = jnp.where(topic[j] == o["interest"], 1.0, p.off_topic)
    a = 1 - jnp.abs(stance[j] - o["stance"]) / 2
    like = p.like_rate * m * a * (1 + p.herding * jnp.log1p(likes[j]))
    cum = jnp.cumsum(jnp.array([like, p.reply_rate * m, p.follow_rate * m * a]) * (n > 0))
    k = (o["u2"] >= cum).sum()
    chosen = jnp.where(k < 3, jnp.array([LIKE, REPLY, FOLLOW])[jnp.minimum(k, 2)] + j,
                       jnp.where(o["u2"] < cum[2] + p.post_rate, POST, SKIP))  # fmt: skip
    return jnp.where(o["u0"] < p.activity, chosen, SKIP)


class Turn(BaseModel):
    """An LLM agent's turn: what it does and, when it posts or replies, what it writes."""

    choice: Literal[CHOICES] = Field(description="what you do this turn")
    text: str | None = Field(
        None, max_length=200, description="your post's or reply's text, else null"
    )


def recommend(u, w, p):
    """Each agent's feed: serials of ``FEED`` posts (-1: none), ranked among candidates drawn
    by uniforms ``u`` (agents, candidates), one in each equal stratum of the new posts."""
    n, cap, c = p.population, w["serial"].size, p.candidates
    lo = jnp.maximum(w["seen"], w["head"] - cap)[:, None]  # new since the agent's last visit
    span = w["head"] - lo
    rand = lo + ((jnp.arange(c) + u) * span / c).astype(jnp.int32)  # ascending
    fol = jnp.where(w["follows"] >= 0, w["last"][jnp.maximum(w["follows"], 0)], -1)
    fol = jnp.where(fol >= lo, fol, -1)
    again = jnp.pad(rand[:, 1:] == rand[:, :-1], ((0, 0), (1, 0))) | (
        rand[:, :, None] == fol[:, None]
    ).any(2)
    cand = jnp.concatenate([fol, jnp.where((span > 0) & ~again, rand, -1)], 1)  # each post once
    post = lambda k: jnp.take(w[k], cand % cap, mode="clip")  # noqa: E731 - in bounds: fast
    ok = (cand >= 0) & (post("serial") == cand) & (post("author") != jnp.arange(n)[:, None])
    age = (w["t"] - post("time")).astype(jnp.float32)
    score = {"recency": lambda: cand.astype(jnp.float32),
             "popularity": lambda: (post("likes") + 1) / (age + 2) ** 1.5,
             "interest": lambda: (post("topic") == w["interest"][:, None]) + 1 / (age + 2)}[p.recommender]()  # fmt: skip
    score, col = jnp.where(ok, score, -jnp.inf), jnp.arange(cand.shape[1])
    beaten = (score[:, None] > score[:, :, None]) | (
        (score[:, None] == score[:, :, None]) & (col < col[:, None])
    )
    pick = (beaten.sum(2)[:, :, None] == jnp.arange(FEED)) & ok[:, :, None]  # rank by counting:
    return jnp.where(pick.any(1), (cand[:, :, None] * pick).sum(1), -1)  # cheaper than top_k on CPU


def herd_effect(w, out):
    """Mean organic likes of treated over control posts ``MATURE`` steps old or more, minus 1."""
    old = (w["serial"] >= 0) & (w["t"] - w["time"] >= MATURE)
    organic, treated = w["likes"] - w["treated"], w["treated"] > 0
    mean = lambda g: jnp.sum(organic * (old & g)) / jnp.maximum(jnp.sum(old & g), 1)  # noqa: E731
    return mean(treated) / mean(~treated) - 1


def diversity(w, out):
    """Entropy of the topics of the step's new posts, over log(topics) (NaN: none written)."""
    q = out["topics"] / out["topics"].sum()
    return (0.0 - jnp.sum(jnp.where(q > 0, q * jnp.log(jnp.where(q > 0, q, 1.0)), 0.0))) / jnp.log(
        q.size
    )


def cross(w, out):
    """Share of follow edges between agents of opposite stance (NaN: no edges yet)."""
    side = w["stance"] > 0
    edge = w["follows"] >= 0
    return jnp.sum(edge & (side[:, None] != side[jnp.maximum(w["follows"], 0)])) / edge.sum()


class SocialNetwork(Study):
    """Posts, replies, likes and follows on a growing follow graph, fed by a recommender."""

    Params = SocialNetworkParams
    name = "social-network"
    actions = Discrete(CHOICES, rule=act)
    features = (
        "interest",
        "stance",
        *(f"{f}{i}" for f in ("topic", "likes", "stance") for i in SLOTS),
    )
    prompt = staticmethod(lambda p: (
        f"You use a social network. Topics are numbered 0 to {p.topics - 1}; you care most about topic "
        "{interest:.0f}. Your opinion, on a scale from -1 to +1, is {stance:+.2f}. Your feed:\n"
        + "\n".join(f"{i}. a post on topic {{topic{i}:.0f}} with {{likes{i}:.0f}} likes by someone of "
                    f"opinion {{stance{i}:+.2f}}" for i in SLOTS)
        + "\nA post on topic -1 is an empty slot. This turn, do one thing: skip, post (write a new "
        "post on your topic), or like, reply to, or follow the author of one post, named by its number. "
        "If you post or reply, write its text, a sentence or two (at most 200 characters), in your own words."
    ))  # fmt: skip
    reply = Turn
    reporters = {
        "herd_effect": herd_effect,
        "thematic_diversity": diversity,
        "mean_depth": lambda w, out: jnp.sum(w["depth"] * (w["serial"] >= 0)) / jnp.maximum(jnp.sum(w["serial"] >= 0), 1),
        "max_depth": lambda w, out: w["depth"].max(),
        "polarisation": lambda w, out: w["stance"].var(),
        "cross_follows": cross,
        "posts": lambda w, out: out["new"].sum(),
        "follows": lambda w, out: (w["follows"] >= 0).mean() * FOLLOWS,
    }  # fmt: skip
    headline = ("herd_effect", "thematic_diversity", "mean_depth", "polarisation")

    def init(key, p):
        n, cap = p.population, int(p.population * p.posts_per_agent)
        u = jax.random.uniform(key, (n, 5 + p.candidates))  # one draw compiles fastest
        none, zero = jnp.full(cap, -1, jnp.int32), jnp.zeros(cap, jnp.int32)
        w = {"serial": none, "author": none, "topic": zero, "parent": none, "depth": zero, "time": zero,
             "likes": jnp.zeros(cap), "treated": jnp.zeros(cap), "post_stance": jnp.zeros(cap),
             "head": jnp.int32(0), "t": jnp.int32(0),
             "interest": (u[:, 3] * p.topics).astype(jnp.int32), "stance": 2 * u[:, 4] - 1,
             "follows": jnp.full((n, FOLLOWS), -1, jnp.int32), "followed": jnp.zeros(n, jnp.int32),
             "last": jnp.full(n, -1, jnp.int32), "seen": jnp.zeros(n, jnp.int32),
             "u": u[:, :3]}  # fmt: skip
        return {**w, "feed": recommend(u[:, 5:], w, p)}

    def observe(w, p):
        s, ok = w["feed"] % w["serial"].size, w["feed"] >= 0
        cols = {
            f: jnp.where(ok, w[k][s], d)
            for f, k, d in (
                ("topic", "topic", -1),
                ("likes", "likes", 0),
                ("stance", "post_stance", 0),
            )
        }
        slots = {f"{f}{i}": v[:, i - 1].astype(jnp.float32) for f, v in cols.items() for i in SLOTS}
        return {**slots, "interest": w["interest"].astype(jnp.float32), "stance": w["stance"],
                **{f"u{i}": w["u"][:, i] for i in range(3)}}  # fmt: skip

    def publish(fields, reply, p):
        """An LLM agent's post or reply as text on the post's topic (None: it wrote nothing)."""
        choice, text = reply["choice"], " ".join((reply.get("text") or "").split())
        topic = fields["interest"] if choice == "post" else fields.get(f"topic{choice[-1]}", -1)
        if not text or topic < 0 or not (choice == "post" or choice.startswith("reply")):
            return None
        return {"content": text, "kind": f"topic {topic:.0f}"}

    def retrieve(fields, p):
        """What an LLM agent reads before its turn: the newest posts on its interest."""
        return {"query": "", "kinds": [f"topic {fields['interest']:.0f}"], "newest": True}

    def due(w, p):
        return w["u"][:, 0] < p.activity  # LLM agents are asked when they visit their feed

    def step(key, w, act, p):
        n, cap, ar = p.population, w["serial"].size, jnp.arange(p.population)
        j = jnp.clip((act - LIKE) % FEED, 0, FEED - 1)
        target = jnp.where(act >= LIKE, w["feed"][ar, j], -1)
        ts = target % cap
        ok = (target >= 0) & (w["serial"][ts] == target)
        like, reply = ok & (act < REPLY), ok & (act >= REPLY) & (act < FOLLOW)
        author = w["author"][ts]
        follow = ok & (act >= FOLLOW) & ~(w["follows"] == author[:, None]).any(1)
        draw = jax.random.uniform(key, (n, 5 + p.candidates))  # the step's draws, then the next's
        gap = w["post_stance"][ts] - w["stance"]
        push = jnp.where(like, 1, 0) - (reply & (jnp.abs(gap) >= p.tolerance))
        stance = jnp.clip(w["stance"] + p.influence * push * gap, -1, 1)
        interest = jnp.where(like & (draw[:, 0] < p.drift), w["topic"][ts], w["interest"])
        f_at = w["followed"] % FOLLOWS
        follows = w["follows"].at[ar, f_at].set(jnp.where(follow, author, w["follows"][ar, f_at]))
        likes = w["likes"].at[jnp.where(like, ts, cap)].add(1.0, mode="drop")
        new = (act == POST) | reply
        serial = w["head"] + jnp.cumsum(new) - 1
        at = jnp.where(new, serial % cap, cap)
        topic = jnp.where(reply, w["topic"][ts], w["interest"])
        treated = (draw[:, 1] < p.treatment).astype(jnp.float32)
        put = lambda x, v: x.at[at].set(v, mode="drop")  # noqa: E731
        w = {**w, "serial": put(w["serial"], serial), "author": put(w["author"], ar), "topic": put(w["topic"], topic),
             "parent": put(w["parent"], jnp.where(reply, target, -1)), "time": put(w["time"], w["t"] + 1),
             "depth": put(w["depth"], jnp.where(reply, w["depth"][ts] + 1, 0)), "likes": put(likes, treated),
             "treated": put(w["treated"], treated), "post_stance": put(w["post_stance"], w["stance"]),
             "head": w["head"] + new.sum(), "t": w["t"] + 1, "interest": interest, "stance": stance,
             "follows": follows, "followed": w["followed"] + follow, "last": jnp.where(new, serial, w["last"]),
             "seen": jnp.where((act != SKIP) | (w["u"][:, 0] < p.activity), w["head"], w["seen"]), "u": draw[:, 2:5]}  # fmt: skip
        return {**w, "feed": recommend(draw[:, 5:], w, p)}, {
            "new": new,
            "topics": jnp.zeros(p.topics).at[topic].add(new),
        }
