"""Run code written by agents (executable artifacts) in a contained subprocess.

Agents write code such as ``def solve(x): ...``; a verifier calls :func:`run_function` to
run it on task inputs. The code is untrusted (agents may be adversarial, or just wrong), so
it runs in a fresh ``python -I -S`` process with layered limits, and every failure it can
cause comes back as a failed :class:`SandboxResult`, never as an exception:

- Process: an empty environment (no variable of the parent, so no API key), its working
  directory a fresh temporary directory removed afterwards, its own session (the wall-clock
  limit kills the whole process group), rlimits on CPU time (``RLIMIT_CPU``), address space
  (``RLIMIT_AS``), file size, open files, core dumps and processes (``RLIMIT_NPROC``, which
  does not bind root). Started as root, the child drops to ``nobody`` before running the
  code, so the kernel's permission checks and ``RLIMIT_NPROC`` apply too. Where the
  interpreter offers ``os.unshare`` (3.12+) and it is permitted, the child also leaves the
  network namespace; nothing depends on that.
- Interpreter: an audit hook (``sys.addaudithook``), installed before the code is compiled,
  refuses every audited operation outside a short allow-list: imports, ``open`` outside the
  temporary directory (reads and writes), sockets, ``os.system``/``exec*``/``fork``/
  ``posix_spawn``, ``subprocess``, ``ctypes``, ``os.putenv``, directory listing, renames,
  new audit hooks, frame access (``tb_frame``, ``sys._getframe``...) and code-object
  creation. It keeps no state that the code can reach or change. The code sees restricted
  builtins (no ``exec``/``eval``/``compile``/``input``; ``__import__`` admits only the
  allowed modules, ``print`` writes nowhere).
- Data: inputs go in by ``marshal`` (written by the parent), outputs come back as JSON,
  one line per input; only plain JSON values count (None, bool, int, finite float, str,
  list or tuple, dict with str keys).

Not contained: ``posix`` calls that CPython does not audit, reachable by walking the object
graph (``stat``, ``readlink``, ``mknod``/``mkfifo`` creating empty files where the child's
user may write, ``setpriority``, ``chroot``...): as ``nobody`` they reveal file metadata and
leave empty files at most, but as root (where the drop to ``nobody`` is refused) they go
further; memory-corruption bugs in CPython; filling the disk inside the temporary directory
(16 MiB a file, bounded by the CPU limit); and outputs forged by code that writes to its own
stdout (it can only forge its own answers).
"""

from __future__ import annotations

import contextlib
import json
import marshal
import math
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

DEFAULT_MODULES: frozenset[str] = frozenset(
    {
        "math", "re", "string", "itertools", "collections", "functools", "operator",
        "heapq", "bisect", "statistics", "json",
    }
)  # fmt: skip

_NOBODY = 65534  # uid/gid the child drops to when started as root
_DROP_PRIVILEGES = True  # tests turn it off to check the audit hook alone
_MAX_OUTPUT = 16 * 2**20  # bytes of results (and of any file the code writes)
_MAX_OPEN_FILES = 16
_EXIT_OUTPUT_LIMIT = 3  # the child's exit status when its results pass _MAX_OUTPUT


@dataclass(frozen=True)
class SandboxResult:
    """Outcome of one run: ``outputs[i]`` is None where input ``i`` failed, and
    ``errors[i]`` says why (one line); ``error`` is the first failure, None when ``ok``."""

    ok: bool
    outputs: list[Any]
    error: str | None
    errors: list[str | None]


def run_function(
    source: str,
    function: str,
    inputs: Sequence[Any],
    *,
    cpu_s: float = 1.0,
    memory_mb: int = 256,
    wall_s: float = 3.0,
    allowed_modules: Iterable[str] = DEFAULT_MODULES,
) -> SandboxResult:
    """Call ``function`` defined by ``source`` on each of ``inputs`` in a sandboxed process.

    Limits cover the whole call: ``cpu_s`` of CPU time (rounded up to whole seconds),
    ``memory_mb`` of address space for the child interpreter, ``wall_s`` of wall-clock time.
    Bad arguments raise ValueError; anything the code does comes back in the result.
    """
    inputs, allowed = _check(source, function, inputs, cpu_s, memory_mb, wall_s, allowed_modules)
    # Only allowed modules that the source names are loaded (before the audit hook); the
    # rest would cost start-up time for nothing.
    preload = sorted(m for m in allowed if re.search(rf"\b{m}\b", source))
    work = os.path.realpath(tempfile.mkdtemp(prefix="society-sandbox-"))
    try:
        drop = _DROP_PRIVILEGES and os.geteuid() == 0
        if drop:  # where chown is refused, the code just cannot write its scratch files
            with contextlib.suppress(OSError):
                os.chown(work, _NOBODY, _NOBODY)
        job = {
            "source": source,
            "function": function,
            "inputs": inputs,
            "allowed": sorted(allowed),
            "preload": preload,
            "work": work,
            "cpu": max(1, math.ceil(cpu_s)),
            "mem": int(memory_mb) * 2**20,
            "fsize": _MAX_OUTPUT,
            "exit_output_limit": _EXIT_OUTPUT_LIMIT,
            "nofile": _MAX_OPEN_FILES,
            "drop": drop,
            "nobody": _NOBODY,
        }
        with (
            tempfile.TemporaryFile() as fin,
            tempfile.TemporaryFile() as fout,
            tempfile.TemporaryFile() as ferr,
        ):
            fin.write(marshal.dumps(job))
            fin.seek(0)
            try:
                proc = subprocess.Popen(
                    [sys.executable, "-I", "-S", "-c", _CHILD],
                    stdin=fin,
                    stdout=fout,
                    stderr=ferr,
                    cwd=work,
                    env={},
                    start_new_session=True,
                )
            except OSError as exc:
                return _failed(len(inputs), f"sandbox could not start: {exc}")
            exited = reaped = False
            try:
                exited, reaped = _wait(proc, wall_s)
            finally:  # also when the parent is interrupted: leave no child behind
                if not reaped:  # the pid is still ours, so its group id cannot have been reused
                    with contextlib.suppress(OSError):
                        os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            fout.seek(0)
            out = fout.read(_MAX_OUTPUT + 1)
            ferr.seek(0, os.SEEK_END)
            ferr.seek(max(0, ferr.tell() - 4096))
            err = ferr.read().decode("utf-8", "replace")
        return _collect(len(inputs), out, proc.returncode, not exited, err)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _check(source, function, inputs, cpu_s, memory_mb, wall_s, allowed_modules):
    if not isinstance(source, str):
        raise ValueError(f"source must be a str, got {type(source).__name__}")
    if not isinstance(function, str) or not function.isidentifier():
        raise ValueError(f"function must be a Python identifier, got {function!r}")
    if isinstance(inputs, str | bytes) or not isinstance(inputs, Sequence):
        raise ValueError(f"inputs must be a list of JSON values, got {type(inputs).__name__}")
    try:  # the code sees exactly what JSON carries (tuples become lists)
        inputs = json.loads(json.dumps(list(inputs), allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"inputs must be JSON-serialisable: {exc}") from None
    for name, value in (("cpu_s", cpu_s), ("wall_s", wall_s)):
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not 0 < value < math.inf
        ):
            raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
    if isinstance(memory_mb, bool) or not isinstance(memory_mb, int) or memory_mb < 32:
        raise ValueError(f"memory_mb must be an int >= 32, got {memory_mb!r}")
    allowed = frozenset(allowed_modules)
    bad = sorted(repr(m) for m in allowed if not (isinstance(m, str) and m.isidentifier()))
    if bad:
        raise ValueError(f"allowed_modules must be top-level module names, got {', '.join(bad)}")
    return inputs, allowed


def _wait(proc: subprocess.Popen, wall_s: float) -> tuple[bool, bool]:
    """(exited in time, already reaped). A pidfd waits without reaping or polling."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfd (old kernel, other OS): Popen's polling wait
        try:
            proc.wait(wall_s)
            return True, True
        except subprocess.TimeoutExpired:
            return False, False
    try:
        poller = select.poll()  # not select.select: the fd may be above 1024
        poller.register(fd, select.POLLIN)
        ready = poller.poll(wall_s * 1000)
    finally:
        os.close(fd)
    return bool(ready), False


def _failed(n: int, error: str) -> SandboxResult:
    return SandboxResult(False, [None] * n, error, [error] * n)


def _collect(n: int, out: bytes, rc: int, timed_out: bool, err: str) -> SandboxResult:
    """Read the child's result lines; explain the inputs that have none."""
    outputs: list[Any] = [None] * n
    errors: list[str | None] = [None] * n
    done = [False] * n
    fatal = None
    for line in out[:_MAX_OUTPUT].splitlines():
        try:
            i, good, value = json.loads(line)
        except (ValueError, TypeError, RecursionError):
            continue  # a torn last line, or bytes the code wrote itself
        if type(i) is not int or good not in (0, 1) or not -1 <= i < n:
            continue
        if i == -1:
            fatal = fatal or str(value)[:300]
        elif not done[i]:
            done[i] = True
            outputs[i] = value if good else None
            errors[i] = None if good else str(value)[:300]
    if fatal is not None:
        return _failed(n, fatal)
    if not all(done) or (n == 0 and (timed_out or rc != 0)):
        why = _why(rc, timed_out, err)
        first = done.index(False) if n else 0
        for i in range(first, n):
            if not done[i]:
                errors[i] = why if i == first else f"not run ({why})"
        if n == 0:
            return SandboxResult(False, [], why, [])
    error = next((e for e in errors if e is not None), None)
    return SandboxResult(error is None, outputs, error, errors)


def _why(rc: int, timed_out: bool, err: str) -> str:
    """Why the child stopped before reporting every input."""
    if timed_out:
        return "timeout"
    if rc == -signal.SIGXCPU:
        return "cpu limit"
    if "MemoryError" in err:
        return "memory limit"
    if rc == -signal.SIGKILL:
        return "killed (cpu or memory limit)"
    if rc == _EXIT_OUTPUT_LIMIT:
        return f"output limit ({_MAX_OUTPUT // 2**20} MiB)"
    if rc < 0:
        try:
            return f"crashed ({signal.Signals(-rc).name})"
        except ValueError:
            return f"crashed (signal {-rc})"
    if rc != 0:
        return f"crashed (exit status {rc})"
    return "no result"


# The child. Everything before _install() is trusted set-up; the hook goes in before the
# untrusted source is compiled. The hook and its settings live only in a closure that no
# reachable object refers to, and it binds the builtins it uses, so code that reaches the
# real builtins or sys.modules cannot change what it refuses.
_CHILD = r"""
import sys, marshal, posix, builtins


class Forbidden(PermissionError):
    pass


def _install(work, record, addaudithook):
    prefix = work + "/"
    allowed = frozenset(("compile", "exec", "builtins.id", "sys.unraisablehook",
                         "sys._getframemodulename"))  # a name only (namedtuple, 3.12+)
    frame_attrs = frozenset(("tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back",
                             "f_globals", "f_locals", "f_builtins"))
    _type, _str, _repr, _ValueError, _Forbidden = type, str, repr, ValueError, Forbidden
    _stat, _OSError = posix.stat, OSError

    def hook(event, args):
        if event in allowed:
            return
        if event == "open":
            path = args[0]
            if _type(path) is not _str:
                what = "open (not a str path)"
            elif ("\x00" in path or (path[:1] == "/" and not path.startswith(prefix))
                    or ".." in path.split("/")):
                what = "open " + _repr(path)
            else:  # inside the directory (which holds no symlinks: creating one is refused)
                try:
                    mode = _stat(path).st_mode
                except _OSError:  # not there yet: open creates a plain file or fails
                    return
                if mode & 0o170000 == 0o100000:
                    return
                what = "open of a special file " + _repr(path)  # FIFO, device node
        elif event == "object.__getattr__":
            if args[1] not in frame_attrs:
                return
            what = "frame access"
        elif event == "object.__setattr__" or event == "object.__delattr__":
            if args[1] != "__code__":  # __module__, __defaults__...: namedtuple sets them
                return
            what = "replacing __code__"
        elif event == "sys._getframe":  # collections.namedtuple tolerates a ValueError here
            raise _ValueError("the call stack is not available in the sandbox")
        elif event == "import":
            what = "import " + (args[0] if _type(args[0]) is _str else "?")
        else:
            what = event
        what = "forbidden: " + what
        record(what)
        raise _Forbidden(what)

    addaudithook(hook)


def _importer(allowed, modules):
    def __import__(name, globals=None, locals=None, fromlist=(), level=0):
        top = name.partition(".")[0]
        if level:
            raise ImportError("forbidden: relative import")
        if top not in allowed:
            raise ImportError("forbidden: import " + name)
        module = modules.get(name if fromlist else top)
        if module is None or modules.get(name) is None:
            raise ImportError("forbidden: import " + name + " (only modules named in the source are loaded)")
        return module
    return __import__


def _describe(e):
    if isinstance(e, MemoryError):
        return "memory limit"
    try:
        text = str(e)
    except BaseException:
        text = ""
    if not text.startswith("forbidden: "):
        try:
            name = type(e).__name__
        except BaseException:
            name = "Exception"
        text = name + ": " + text if text else name
    return " ".join(text.split())[:300]


def _encoder(esc):
    inf = float("inf")

    def enc(x):
        t = type(x)
        if x is None:
            return "null"
        if t is bool:
            return "true" if x else "false"
        if t is int:
            return int.__repr__(x)
        if t is float:
            if x != x or x == inf or x == -inf:
                raise TypeError("float " + float.__repr__(x))
            return float.__repr__(x)
        if t is str:
            return esc(x)
        if t is list or t is tuple:
            return "[" + ",".join([enc(v) for v in x]) + "]"
        if t is dict:
            parts = []
            for k, v in x.items():
                if type(k) is not str:
                    raise TypeError("dict key of type " + type(k).__name__)
                parts.append(esc(k) + ":" + enc(v))
            return "{" + ",".join(parts) + "}"
        raise TypeError(t.__name__)

    return enc


def _main():
    job = marshal.loads(sys.stdin.buffer.read())
    write, _exit, over_limit = posix.write, posix._exit, job["exit_output_limit"]

    def emit(i, good, text):
        data = ("[%d,%d,%s]\n" % (i, good, text)).encode()
        try:
            while data:
                data = data[write(1, data):]
        except OSError:  # over the output limit
            _exit(over_limit)

    try:
        from _json import encode_basestring_ascii as esc
    except ImportError:
        from json.encoder import encode_basestring_ascii as esc
    enc = _encoder(esc)
    try:
        for name in job["preload"]:
            __import__(name)
    except ImportError as e:
        emit(-1, 0, esc("sandbox: cannot load allowed module: " + str(e)))
        _exit(0)
    import resource as r

    # Defence in depth where permitted; nothing relies on it.
    if hasattr(posix, "unshare") and posix.geteuid() == 0:
        try:
            posix.unshare(posix.CLONE_NEWNET)
        except OSError:
            pass
    if job["drop"]:  # each step as far as permitted (containers may refuse setgroups)
        for step, arg in ((posix.setgroups, []), (posix.setgid, job["nobody"]),
                          (posix.setuid, job["nobody"])):
            try:
                step(arg)
            except OSError:
                pass
    r.setrlimit(r.RLIMIT_CPU, (job["cpu"], job["cpu"] + 1))
    r.setrlimit(r.RLIMIT_AS, (job["mem"], job["mem"]))
    r.setrlimit(r.RLIMIT_FSIZE, (job["fsize"], job["fsize"]))
    r.setrlimit(r.RLIMIT_NOFILE, (job["nofile"], job["nofile"]))
    r.setrlimit(r.RLIMIT_CORE, (0, 0))
    r.setrlimit(r.RLIMIT_NPROC, (0, 0))
    sys.modules.pop("_signal", None)  # pidfd_send_signal is not audited
    refusals = []
    _install(job["work"], refusals.append, sys.addaudithook)

    safe = dict(builtins.__dict__)
    for name in ("breakpoint", "input", "help", "exit", "quit", "copyright", "credits",
                 "license", "compile", "exec", "eval", "__loader__", "__spec__"):
        safe.pop(name, None)
    safe["print"] = lambda *args, **kwargs: None
    safe["__import__"] = _importer(frozenset(job["allowed"]), sys.modules)
    namespace = {"__builtins__": safe, "__name__": "artifact"}
    inputs = job["inputs"]
    function = job["function"]
    source = job["source"]
    del job
    try:
        code = compile(source, "<artifact>", "exec", dont_inherit=True)
    except SyntaxError as e:
        emit(-1, 0, esc("SyntaxError: %s (line %s)" % (e.msg, e.lineno)))
        _exit(0)
    except BaseException as e:
        emit(-1, 0, esc(_describe(e)))
        _exit(0)
    try:
        exec(code, namespace)
        fn = namespace.get(function)
        problem = None if callable(fn) else "no function %r in the source" % function
    except BaseException as e:
        problem = _describe(e)
    if refusals:
        problem = refusals[0]
    if problem is not None:
        emit(-1, 0, esc(problem))
        _exit(0)
    for i, x in enumerate(inputs):
        before = len(refusals)
        try:
            y = fn(x)
        except BaseException as e:
            good, text = 0, _describe(e)
        else:
            try:
                good, text = 1, enc(y)
            except MemoryError:
                good, text = 0, "memory limit"
            except RecursionError:
                good, text = 0, "not JSON-serialisable: nested too deeply"
            except BaseException as e:
                good, text = 0, "not JSON-serialisable: " + _describe(e).partition(": ")[2]
        if len(refusals) > before:
            good, text = 0, refusals[before]
        emit(i, good, text if good else esc(text))
    _exit(0)


_main()
"""
