"""Discrete-event scheduler: a tiny SimPy-like API that is asyncio-native and batch-aware.

Events are ordered by ``(time, priority, sequence)``: lower priority values run first and
ties keep insertion order, so a run is deterministic. All events due at the same
``(time, priority)`` form one *moment*: plain handlers run in sequence order, coroutine
handlers run concurrently (LLM calls in flight together), and any *effect* a handler
returns (a zero-argument callable) is applied after the whole moment, in sequence order.
So the order in which concurrent coroutines finish never changes the results, provided
coroutine handlers change shared state only through the effect they return.

Events of a :func:`batched` handler that fall in one moment are merged into one call with
the concatenated agent ids: a cohort acts once for all its due agents, not once per agent.

The queue is data: handlers registered by name (:meth:`Scheduler.handle`) let
:meth:`Scheduler.snapshot` write ``(now, sequence, queue)`` as plain values, and
:meth:`Scheduler.restore` rebuild it in a new process whose handlers were registered under
the same names. That is what run checkpoints stand on (``sim_core.checkpoint``).
"""

from __future__ import annotations

import asyncio
import heapq
import inspect
import itertools
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

__all__ = ["Event", "EventError", "Process", "Scheduler", "SnapshotError", "batched"]


class SnapshotError(RuntimeError):
    """The queue holds something that cannot be saved as data (an unregistered handler)."""


class EventError(RuntimeError):
    """A handler failed; names the event, its time and the agents involved."""

    def __init__(self, event: Event, exc: BaseException):
        agents = _describe_agents(event.agents)
        super().__init__(
            f"event '{event.label}' (#{event.seq}) at t={event.time:g} failed"
            f"{agents}: {type(exc).__name__}: {exc}"
        )
        self.event = event


def _describe_agents(agents: Any) -> str:
    if agents is None:
        return ""
    ids = np.atleast_1d(np.asarray(agents))
    shown = ", ".join(str(int(a)) for a in ids[:8])
    more = f", ... ({ids.size} in all)" if ids.size > 8 else ""
    return f" for agents [{shown}{more}]"


def _ids(agents: Any) -> np.ndarray:
    return np.atleast_1d(np.asarray(agents))


class _Batched:
    """Marks a handler whose due events are merged into one call per moment."""

    __slots__ = ("fn", "__name__")

    def __init__(self, fn: Callable[[np.ndarray], Any]):
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", repr(fn))

    def __call__(self, agents: np.ndarray) -> Any:
        return self.fn(agents)


def batched(fn: Callable[[np.ndarray], Any]) -> _Batched:
    """Declare ``fn(agents: np.ndarray)`` as a batched handler (one call per moment)."""
    return _Batched(fn)


class Event(NamedTuple):
    """A scheduled call; also the heap entry, so scheduling allocates one tuple. Keep it to
    :meth:`Scheduler.cancel` the event. Ordered by (time, priority, seq); seq is unique."""

    time: float
    priority: int
    seq: int
    handler: Callable[..., Any]
    args: tuple
    agents: Any
    name: str | None

    @property
    def label(self) -> str:
        """The given name, else the handler's name."""
        return self.name or getattr(self.handler, "__name__", repr(self.handler))

    def __repr__(self) -> str:
        return f"<Event {self.label!r} t={self.time:g} prio={self.priority} #{self.seq}>"


_new_event = tuple.__new__  # builds an Event without the Python-level __new__ (hot path)


class Process:
    """A recurring handler started by :meth:`Scheduler.every`; cancel it to stop it."""

    __slots__ = ("sim", "interval", "handler", "args", "priority", "name", "next", "stopped")

    def __init__(self, sim, interval, handler, args, priority, name):
        self.sim = sim
        self.interval = interval
        self.handler = handler
        self.args = args
        self.priority = priority
        self.name = name
        self.next: Event | None = None
        self.stopped = False

    def _fire(self) -> Any:
        # Reschedule first so the cadence does not depend on what the handler does.
        self.next = self.sim.after(
            self.interval, self._fire, priority=self.priority, name=self.name
        )
        return self.handler(*self.args)

    def cancel(self) -> None:
        self.stopped = True
        if self.next is not None:
            self.sim.cancel(self.next)


class Scheduler:
    """Event queue and clock. ``run()`` from a script, ``await arun()`` inside a loop."""

    def __init__(self, start: float = 0.0):
        self.now: float = float(start)
        self.dispatched: int = 0
        self._heap: list[Event] = []
        self._counter = itertools.count()
        self._cancelled: set[int] = set()  # seqs of cancelled events still in the heap
        self._stop_reason: str | None = None
        self.handlers: dict[str, Callable[..., Any]] = {}
        # called after each moment (checkpoints); what it returns, if not None, is awaited
        self.on_moment: Callable[[], Any] | None = None

    def handle(self, name: str, handler: Callable[..., Any]) -> Callable[..., Any]:
        """Register ``handler`` under ``name`` so that events calling it can be saved by
        :meth:`snapshot` and rebuilt by :meth:`restore`. Returns the handler."""
        if name in self.handlers and self.handlers[name] is not handler:
            raise ValueError(f"handler name '{name}' is already registered to another handler")
        self.handlers[name] = handler
        return handler

    # -- scheduling -------------------------------------------------------------------
    def at(
        self,
        time: float,
        handler: Callable[..., Any],
        *args: Any,
        priority: int = 0,
        agents: Any = None,
        name: str | None = None,
    ) -> Event:
        """Schedule ``handler(*args)`` at absolute ``time`` (not before ``now``)."""
        if not time >= self.now:  # also rejects NaN
            raise ValueError(f"cannot schedule at t={time} before the current time t={self.now}")
        if isinstance(handler, _Batched):
            if args:
                raise TypeError("a batched handler takes only agents=..., not positional args")
            if agents is None:
                raise TypeError("a batched handler needs agents=... (an id or an array of ids)")
        ev = _new_event(Event, (time, priority, next(self._counter), handler, args, agents, name))
        heapq.heappush(self._heap, ev)
        return ev

    def after(self, delay: float, handler: Callable[..., Any], *args: Any, **kw: Any) -> Event:
        """Schedule ``handler(*args)`` ``delay`` time units from now."""
        if not delay >= 0:
            raise ValueError(f"delay must be >= 0, got {delay}")
        if kw or type(handler) is _Batched:
            return self.at(self.now + delay, handler, *args, **kw)
        # Hot path (a handler rescheduling itself): the checks of at() cannot fail here.
        ev = _new_event(
            Event, (self.now + delay, 0, next(self._counter), handler, args, None, None)
        )
        heapq.heappush(self._heap, ev)
        return ev

    def every(
        self,
        interval: float,
        handler: Callable[..., Any],
        *args: Any,
        start: float | None = None,
        priority: int = 0,
        name: str | None = None,
    ) -> Process:
        """Call ``handler(*args)`` at ``start`` (default: now) and every ``interval`` after."""
        if not interval > 0:
            raise ValueError(f"interval must be > 0, got {interval}")
        proc = Process(
            self, interval, handler, args, priority, name or getattr(handler, "__name__", None)
        )
        proc.next = self.at(
            self.now if start is None else start, proc._fire, priority=priority, name=proc.name
        )
        return proc

    def cancel(self, item: Event | Process) -> None:
        """Cancel a pending event or stop a recurring process (idempotent)."""
        if isinstance(item, Process):
            item.cancel()
        else:  # a tombstone, dropped when the event surfaces (or the queue empties)
            self._cancelled.add(item.seq)

    def stop(self, reason: str = "stopped") -> None:
        """Stop the run after the current moment (e.g. a budget is spent)."""
        self._stop_reason = reason

    @property
    def stop_reason(self) -> str | None:
        return self._stop_reason

    @property
    def pending(self) -> int:
        """Number of queued live (not cancelled) events."""
        if not self._cancelled:
            return len(self._heap)
        return sum(1 for ev in self._heap if ev.seq not in self._cancelled)

    def peek(self) -> float:
        """Time of the next live event, or ``inf`` if none."""
        heap, cancelled = self._heap, self._cancelled
        while heap and heap[0].seq in cancelled:
            cancelled.discard(heapq.heappop(heap).seq)
        return heap[0].time if heap else math.inf

    # -- saving and restoring ---------------------------------------------------------
    def _handler_name(self, handler: Callable[..., Any], event: Event) -> str:
        for name, fn in self.handlers.items():
            if fn is handler or fn == handler:  # ==: bound methods are new objects per access
                return name
        raise SnapshotError(
            f"event '{event.label}' at t={event.time:g} calls a handler that is not registered; "
            f"register it with scheduler.handle(name, handler) before saving"
        )

    def snapshot(self) -> dict[str, Any]:
        """The clock and the live queue as plain data: handler names, args, agents."""
        events = []
        for ev in sorted(self._heap):
            if ev.seq in self._cancelled:
                continue
            proc = getattr(ev.handler, "__self__", None)
            if isinstance(proc, Process) and ev.handler == proc._fire:
                entry = {
                    "process": self._handler_name(proc.handler, ev),
                    "interval": proc.interval,
                    "args": proc.args,
                }
            else:
                entry = {"handler": self._handler_name(ev.handler, ev), "args": ev.args}
            entry.update(
                time=ev.time, priority=ev.priority, seq=ev.seq, agents=ev.agents, name=ev.name
            )
            events.append(entry)
        return {
            "now": self.now,
            "next_seq": self._peek_counter(),
            "dispatched": self.dispatched,
            "events": events,
        }

    def _peek_counter(self) -> int:
        nxt = next(self._counter)
        self._counter = itertools.count(nxt)
        return nxt

    def restore(self, snap: dict[str, Any]) -> None:
        """Replace the clock and queue by a :meth:`snapshot`'s; handlers are looked up by
        name in this scheduler's registry (register them first)."""
        heap: list[Event] = []
        for e in snap["events"]:
            key = e.get("process") or e["handler"]
            if key not in self.handlers:
                raise SnapshotError(
                    f"saved event '{e.get('name') or key}' calls handler '{key}', which is not registered"
                )
            fn = self.handlers[key]
            args = tuple(e["args"])
            if "process" in e:
                proc = Process(self, float(e["interval"]), fn, args, int(e["priority"]), e["name"])
                handler, args = proc._fire, ()
            else:
                handler = fn
            ev = _new_event(
                Event,
                (
                    float(e["time"]),
                    int(e["priority"]),
                    int(e["seq"]),
                    handler,
                    args,
                    e["agents"],
                    e["name"],
                ),
            )
            if "process" in e:
                proc.next = ev
            heap.append(ev)
        heapq.heapify(heap)
        self._heap, self._cancelled = heap, set()
        self.now = float(snap["now"])
        self.dispatched = int(snap["dispatched"])
        self._counter = itertools.count(int(snap["next_seq"]))

    # -- running ----------------------------------------------------------------------
    def run(
        self,
        until: float | Callable[[], bool] | None = None,
        *,
        max_events: int | None = None,
    ) -> int:
        """Run from a script; see :meth:`arun`. Returns the number of events dispatched."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.arun(until, max_events=max_events))
        raise RuntimeError(
            "Scheduler.run() was called inside a running event loop (a notebook or async "
            "code); use `await scheduler.arun(...)` there"
        )

    async def arun(
        self,
        until: float | Callable[[], bool] | None = None,
        *,
        max_events: int | None = None,
    ) -> int:
        """Dispatch events until the queue empties, ``until`` (a time, exclusive of later
        events, or a predicate checked after each moment) or ``max_events`` is reached,
        or :meth:`stop` is called. The clock ends at ``until`` when it is a time."""
        until_time = math.inf
        predicate = None
        if callable(until):
            predicate = until
        elif until is not None:
            until_time = float(until)
            if until_time < self.now:
                raise ValueError(f"until={until_time} is before the current time t={self.now}")
        budget = math.inf if max_events is None else max_events
        self._stop_reason = None
        heap, cancelled = self._heap, self._cancelled
        pop = heapq.heappop
        done = 0
        while heap and done < budget:
            ev = heap[0]
            t = ev[0]
            if t > until_time:
                break
            pop(heap)
            if cancelled and ev[2] in cancelled:
                cancelled.discard(ev[2])
                continue
            self.now = t
            if heap and heap[0][0] == t and heap[0][1] == ev[1]:
                group = [ev]
                while heap and heap[0][0] == t and heap[0][1] == ev[1]:
                    nxt = pop(heap)
                    if cancelled and nxt[2] in cancelled:
                        cancelled.discard(nxt[2])
                    else:
                        group.append(nxt)
                done += await self._dispatch_moment(group)
            else:
                # Fast path: a lone event, called directly.
                handler = ev[3]
                try:
                    result = (
                        handler(*ev[4]) if type(handler) is not _Batched else handler(_ids(ev[5]))
                    )
                except Exception as exc:
                    raise EventError(ev, exc) from exc
                if result is not None:
                    await self._settle([ev], [result])
                done += 1
            if self.on_moment is not None and (not heap or heap[0][0] != t or heap[0][1] != ev[1]):
                pending = self.on_moment()
                if pending is not None:  # a coroutine: e.g. a checkpoint waiting for a reply
                    await pending
            if self._stop_reason is not None or (predicate is not None and predicate()):
                break
        if not heap:
            cancelled.clear()  # tombstones of events cancelled after they ran
        if (
            until_time != math.inf
            and self._stop_reason is None
            and (not heap or heap[0][0] > until_time)
        ):
            self.now = max(self.now, until_time)
        self.dispatched += done
        return done

    async def _dispatch_moment(self, group: list[Event]) -> int:
        """Dispatch one moment: merge batched handlers, run, then apply effects in order."""
        calls: list[Event] = []
        merged: dict[int, list[Event]] = {}
        for ev in group:
            if type(ev.handler) is _Batched:
                key = id(ev.handler)
                if key not in merged:
                    merged[key] = []
                    calls.append(ev)  # the first event of a batch stands for it in the order
                merged[key].append(ev)
            else:
                calls.append(ev)
        results = []
        for ev in calls:
            try:
                if type(ev.handler) is _Batched:
                    members = merged[id(ev.handler)]
                    if len(members) == 1:
                        agents = _ids(ev.agents)
                    else:
                        agents = np.concatenate([_ids(m.agents) for m in members])
                    results.append(ev.handler(agents))
                else:
                    results.append(ev.handler(*ev.args))
            except Exception as exc:
                # Coroutines already created for this moment are closed, not leaked.
                for r in results:
                    if inspect.iscoroutine(r):
                        r.close()
                raise EventError(ev, exc) from exc
        await self._settle(calls, results)
        return len(group)

    async def _settle(self, events: list[Event], results: list[Any]) -> None:
        """Await coroutine results together, then apply returned effects in sequence order."""
        pending = [i for i, r in enumerate(results) if inspect.isawaitable(r)]
        if pending:
            outs = await asyncio.gather(*(results[i] for i in pending), return_exceptions=True)
            for i, out in zip(pending, outs, strict=True):
                results[i] = out
            for i in pending:  # report the first failure in sequence order
                if isinstance(results[i], BaseException):
                    exc = results[i]
                    raise EventError(events[i], exc) from exc
        for ev, r in zip(events, results, strict=True):
            if callable(r):
                try:
                    r()
                except Exception as exc:
                    raise EventError(ev, exc) from exc
