"""The sandbox for executable artifacts: results come back, hostile code is contained.

Every case runs twice where it matters: as the process is (root in CI: the child drops to
``nobody``) and with the privilege drop turned off, so the audit hook alone must refuse it.
Each test checks that its temporary directories are gone afterwards; the parent surviving
is this test process going on.
"""

from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path

import pytest

from society import sandbox
from society.sandbox import DEFAULT_MODULES, SandboxResult, run_function

# Reach sys and posix without an import statement, as hostile code would.
ESCAPE = "import collections\nsys = collections._sys\nposix = sys.modules['posix']\n"
REAL_BUILTINS = "import collections\nreal = collections._sys.modules['builtins']\n"


@pytest.fixture(autouse=True)
def sandbox_root(tmp_path, monkeypatch):
    """Temporary directories of the sandbox go here, and must all be removed."""
    root = tmp_path / "sandboxes"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    yield root
    assert list(root.iterdir()) == []


@pytest.fixture(params=["as-is", "hook-only"])
def drop(request, monkeypatch):
    """Run as the process is, then without dropping privileges (what root gets where
    setuid is not permitted)."""
    if request.param == "hook-only":
        monkeypatch.setattr(sandbox, "_DROP_PRIVILEGES", False)
    return request.param


def run(source: str, inputs: list, **kw) -> SandboxResult:
    return run_function(source, "solve", inputs, **kw)


def test_correct_function_returns_outputs():
    src = (
        "def solve(x):\n"
        "    if isinstance(x, str):\n"
        "        return x[::-1].upper()\n"
        "    return [v + 3 for v in x]\n"
    )
    r = run(src, ["abc", [1, 2, 3], ""])
    assert r == SandboxResult(True, ["CBA", [4, 5, 6], ""], None, [None, None, None])


def test_allowed_modules_work():
    src = (
        "import statistics, re, json, heapq, math\n"
        "from collections import Counter, namedtuple\n"
        "from functools import lru_cache\n"
        "P = namedtuple('P', 'a b')\n"
        "@lru_cache\n"
        "def fib(n):\n"
        "    return n if n < 2 else fib(n - 1) + fib(n - 2)\n"
        "def solve(x):\n"
        "    return {'mean': statistics.mean(x), 'json': json.dumps(x), 'top': heapq.nlargest(2, x),\n"
        "            'sub': re.sub('1', 'one', str(x)), 'fib': fib(30), 'p': list(P(*x[:2])),\n"
        "            'c': Counter(x).most_common(1), 'pi': math.pi, 't': (1, None, True)}\n"
    )
    r = run(src, [[1, 2, 3, 1]])
    assert r.ok, r.error
    assert r.outputs[0] == {
        "mean": 1.75, "json": "[1, 2, 3, 1]", "top": [3, 2], "sub": "[one, 2, 3, one]",
        "fib": 832040, "p": [1, 2], "c": [[1, 2]], "pi": 3.141592653589793, "t": [1, None, True],
    }  # fmt: skip
    assert "os" not in DEFAULT_MODULES and "subprocess" not in DEFAULT_MODULES


def test_one_input_raising_does_not_spoil_others():
    r = run("def solve(x):\n    return 10 // x\n", [1, 0, 5, "a"])
    assert r.outputs == [10, None, 2, None]
    assert r.errors[0] is None and r.errors[2] is None
    assert r.errors[1] == "ZeroDivisionError: integer division or modulo by zero"
    assert r.errors[3].startswith("TypeError: ")
    assert not r.ok and r.error == r.errors[1]


def test_infinite_loop_is_stopped_and_earlier_outputs_kept():
    src = "def solve(x):\n    while x == 'loop':\n        pass\n    return x\n"
    r = run(src, [1, "loop", 3], cpu_s=1, wall_s=30)
    assert r.outputs == [1, None, None]
    assert r.errors == [None, "cpu limit", "not run (cpu limit)"]
    assert r.error == "cpu limit"


def test_blocked_process_hits_the_wall_clock_limit():
    src = ESCAPE + "def solve(x):\n    return posix.read(posix.pipe()[0], 1)\n"
    r = run(src, [1], wall_s=0.5)
    assert r == SandboxResult(False, [None], "timeout", ["timeout"])


@pytest.mark.parametrize(
    "src, error",
    [
        ("import os\ndef solve(x):\n    while True:\n        os.fork()\n", "forbidden: import os"),
        (
            "import subprocess\ndef solve(x):\n    subprocess.run(['sh'])\n",
            "forbidden: import subprocess",
        ),
        (ESCAPE + "def solve(x):\n    while True:\n        posix.fork()\n", "forbidden: os.fork"),
        (ESCAPE + "def solve(x):\n    posix.system('sh -c :')\n", "forbidden: os.system"),
        (ESCAPE + "def solve(x):\n    posix.execv('/bin/sh', ['sh'])\n", "forbidden: os.exec"),
        (
            ESCAPE + "def solve(x):\n    posix.posix_spawn('/bin/sh', ['sh'], {})\n",
            "forbidden: os.posix_spawn",
        ),
        (
            REAL_BUILTINS + "def solve(x):\n    real.__import__('subprocess')\n",
            "forbidden: import subprocess",
        ),
    ],
)
def test_fork_bomb_and_subprocesses_are_refused(drop, src, error):
    r = run(src, [1])
    assert r == SandboxResult(False, [None], error, [error])


@pytest.mark.parametrize(
    "expr", ["len('x' * 10**10)", "len(bytearray(8 * 2**30))", "len([0] * 10**9)"]
)
def test_huge_allocation_is_a_memory_error(expr):
    r = run(f"def solve(x):\n    return {expr}\n", [1], memory_mb=256)
    assert r == SandboxResult(False, [None], "memory limit", ["memory limit"])


def test_files_outside_the_temp_dir_cannot_be_read(drop, tmp_path):
    mine = tmp_path / "secret.txt"
    mine.write_text("sk-test-secret")
    paths = [
        str(Path.home() / ".bashrc"),
        "/etc/passwd",
        str(mine),
        "/proc/self/environ",
        "../secret.txt",
        str(Path(__file__).resolve()),  # the project's own files
    ]
    r = run("def solve(x):\n    return open(x).read()\n", paths)
    assert r.outputs == [None] * len(paths)
    assert r.errors == [f"forbidden: open {p!r}" for p in paths]
    # nor by other routes to open
    for src in [
        ESCAPE + "def solve(x):\n    return sys.modules['_io'].FileIO(x).read()\n",
        REAL_BUILTINS + "def solve(x):\n    return real.open(x).read()\n",
        ESCAPE + "def solve(x):\n    return posix.read(posix.open(x, 0), 100)\n",
        "class P(str):\n    def startswith(self, *a):\n        return True\n"
        "def solve(x):\n    return open(P(x)).read()\n",
        ESCAPE + "def solve(x):\n    posix.symlink(x, 'link')\n    return open('link').read()\n",
        ESCAPE + "def solve(x):\n    return posix.listdir('/')\n",
        ESCAPE + "def solve(x):\n    posix.mkfifo('fifo')\n    return open('fifo').read()\n",
    ]:
        r = run(src, [str(mine)])
        assert r.outputs == [None] and r.error.startswith("forbidden: "), (src, r)


def test_writes_outside_the_temp_dir_are_refused(drop, tmp_path):
    target = tmp_path / "pwned.txt"
    src = "def solve(x):\n    with open(x, 'w') as f:\n        f.write('pwned')\n    return 'written'\n"
    r = run(src, [str(target)])
    assert r.error == f"forbidden: open {str(target)!r}" and r.outputs == [None]
    assert not target.exists()
    r = run(ESCAPE + "def solve(x):\n    posix.rename('a', x)\n", [str(target)])
    assert r.error == "forbidden: os.rename" and not target.exists()
    # inside its own temporary directory, code may write and read back
    src = "def solve(x):\n    open('scratch.txt', 'w').write(x)\n    return open('scratch.txt').read()\n"
    assert run(src, ["kept"]).outputs == ["kept"]


def test_environment_holds_no_secret(drop, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    assert (
        run("import os\ndef solve(x):\n    return dict(os.environ)\n", [1]).error
        == "forbidden: import os"
    )
    src = (
        ESCAPE
        + "def solve(x):\n    return repr(posix.environ) + repr(sys.modules.get('os') and sys.modules['os'].environ)\n"
    )
    r = run(src, [1])
    assert r.ok and "sk-test-secret" not in r.outputs[0] and "OPENAI" not in r.outputs[0]
    parent = f"/proc/{os.getpid()}/environ"  # where the key is
    r = run("def solve(x):\n    return open(x).read()\n", ["/proc/self/environ", parent])
    assert r.errors == ["forbidden: open '/proc/self/environ'", f"forbidden: open {parent!r}"]


def test_network_is_refused(drop):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        server.setblocking(False)
        port = server.getsockname()[1]
        connect = (
            f"s = socket.socket()\n    s.connect(('127.0.0.1', {port}))\n    return 'connected'\n"
        )
        sources = {
            "import socket\ndef solve(x):\n    " + connect: "forbidden: import socket",
            REAL_BUILTINS + "def solve(x):\n    socket = real.__import__('socket')\n    " + connect: "forbidden: import socket",
            REAL_BUILTINS + "def solve(x):\n    socket = real.__import__('_socket')\n    " + connect: "forbidden: import _socket",
        }  # fmt: skip
        for src, error in sources.items():
            r = run(src, [1])
            assert r.outputs == [None] and r.error == error
        with pytest.raises(BlockingIOError):  # the children have exited: nothing is queued
            server.accept()


@pytest.mark.parametrize(
    "value, why",
    [
        ("{1, 2}", "set"),
        ("object()", "object"),
        ("float('nan')", "float nan"),
        ("{1: 'a'}", "dict key of type int"),
        ("b'bytes'", "bytes"),
        ("[[1, 2], {'a': lambda: 0}]", "function"),
    ],
)
def test_non_json_output_is_a_failure(value, why):
    r = run(f"def solve(x):\n    return {value}\n", [1])
    assert r == SandboxResult(
        False, [None], f"not JSON-serialisable: {why}", [f"not JSON-serialisable: {why}"]
    )


def test_output_forms_that_are_not_results():
    r = run("def solve(x):\n    print('chatter')\n    return x\n", [1])
    assert r.ok and r.outputs == [1]  # print goes nowhere, not into the results
    r = run(
        "def solve(x):\n    l = []\n    for _ in range(10**5):\n        l = [l]\n    return l\n",
        [1],
    )
    assert r.error == "not JSON-serialisable: nested too deeply"
    r = run("def solve(x):\n    return 'y' * (20 * 2**20)\n", [1])
    assert r.error == "output limit (16 MiB)"


@pytest.mark.parametrize(
    "src, error",
    [
        ("def solve(x) return x", "SyntaxError: expected ':' (line 1)"),
        ("def other(x):\n    return x\n", "no function 'solve' in the source"),
        ("solve = 3\n", "no function 'solve' in the source"),
        ("raise ValueError('at import')\n", "ValueError: at import"),
        ("import numpy\ndef solve(x):\n    return x\n", "forbidden: import numpy"),
        ("from . import x\ndef solve(x):\n    return x\n", "forbidden: relative import"),
    ],
)
def test_source_that_cannot_run(src, error):
    assert run(src, [1, 2]) == SandboxResult(False, [None, None], error, [error, error])


@pytest.mark.parametrize(
    "body, error",
    [
        ("sys.addaudithook(lambda *a: None)", "forbidden: sys.addaudithook"),
        (
            "try:\n        1 / 0\n    except Exception as e:\n        return str(e.__traceback__.tb_frame.f_back.f_globals)",
            "forbidden: frame access",
        ),
        ("g = (i for i in [1])\n    return str(g.gi_frame.f_back)", "forbidden: frame access"),
        (
            "return str(sys._getframe(1).f_globals)",
            "ValueError: the call stack is not available in the sandbox",
        ),
        ("return type(solve)(solve.__code__, {})()", "forbidden: function.__new__"),
        ("return solve.__code__.replace(co_consts=(1,))", "forbidden: code.__new__"),
        ("solve.__code__ = (lambda x: 0).__code__", "forbidden: replacing __code__"),
        ("return sys.modules['builtins'].__import__('gc').get_objects()", "forbidden: import gc"),
        ("return sys.modules['builtins'].__import__('ctypes')", "forbidden: import ctypes"),
        ("return sys.modules['_signal'].SIGKILL", "KeyError: '_signal'"),
        ("return sys.modules['resource'].setrlimit(0, (-1, -1))", "forbidden: resource.setrlimit"),
        ("return posix.putenv('A', 'B')", "forbidden: os.putenv"),
        ("return posix.kill(posix.getppid(), 9)", "forbidden: os.kill"),
        ("return posix.killpg(posix.getpgid(posix.getppid()), 9)", "forbidden: os.killpg"),
        ("return sys.modules['marshal'].loads(b'')", "forbidden: marshal.loads"),
        (
            "try:\n        posix.fork()\n    except BaseException:\n        pass\n    return 'caught'",
            "forbidden: os.fork",
        ),
    ],
)
def test_audit_hook_loopholes_are_closed(drop, body, error):
    r = run(ESCAPE + f"def solve(x):\n    {body}\n", [1])
    assert r.outputs == [None] and r.error == error


def test_subclass_walk_finds_nothing_usable(drop):
    src = (
        "import statistics  # loads random, which loads os\n"
        "def solve(x):\n"
        "    found = []\n"
        "    for c in ().__class__.__base__.__subclasses__():\n"
        "        g = getattr(getattr(c, '__init__', None), '__globals__', None) or {}\n"
        "        for name in ('system', 'popen', 'fork'):\n"
        "            if callable(g.get(name)):\n"
        "                try:\n"
        "                    g[name]('true') if name != 'fork' else g[name]()\n"
        "                    found.append(name)\n"
        "                except BaseException:\n"
        "                    pass\n"
        "    return found\n"
    )
    r = run(src, [1])
    assert r.outputs == [None] and r.error == "forbidden: os.system"  # os._wrap_close's globals


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="inputs must be JSON-serialisable"):
        run_function("", "solve", [{1, 2}])
    with pytest.raises(ValueError, match="function must be a Python identifier"):
        run_function("", "not a name", [])
    with pytest.raises(ValueError, match="cpu_s must be a positive number"):
        run_function("", "solve", [], cpu_s=0)
    with pytest.raises(ValueError, match="memory_mb must be an int >= 32"):
        run_function("", "solve", [], memory_mb=1)
    with pytest.raises(ValueError, match="allowed_modules must be top-level module names"):
        run_function("", "solve", [], allowed_modules={"os.path"})
    with pytest.raises(ValueError, match="inputs must be a list"):
        run_function("", "solve", "abc")
