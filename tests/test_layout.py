"""The layout of the package (docs/internals.md): no import cycle among
tcdsl's modules, the runtime imports no compiler module (and runs a kernel
from the disk cache with the compiler's modules blocked), the front end
needs no TVM, no file is over 600 lines."""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import tcdsl
from helpers import ELMAN, ROOT, elman_inputs, reference

PACKAGE = ROOT / "tcdsl"
MAX_LINES = 600
COMPILER = ("tcdsl.syntax", "tcdsl.sema", "tcdsl.polyhedral", "tcdsl.codegen", "tcdsl.driver", "tcdsl.dispatch",
            "tcdsl.api", "tcdsl.options", "tcdsl.testing", "tcdsl.cli")


def _modules() -> dict[str, Path]:
    out = {}
    for p in sorted(PACKAGE.rglob("*.py")):
        parts = p.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The tcdsl modules that ``name`` imports anywhere in its file (inside
    functions too): ``from .x import y`` is module ``x.y`` when that is a
    module, else ``x``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")
                up = up[:len(up) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            for a in node.names:
                out.add(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base)
    return {m for m in out if m in modules and m != name}


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    modules = _modules()
    return {m: _imports(m, p, modules) for m, p in modules.items()}


def test_the_import_graph_is_read(graph):
    # the reader sees relative, nested and lazy imports (a broken reader would pass every test below)
    assert "tcdsl.runtime.signature" in graph["tcdsl.runtime.kernel"]
    assert "tcdsl.codegen.lower" in graph["tcdsl.codegen.cpu"]
    assert "tcdsl.codegen.cpu" in graph["tcdsl.driver"]  # imported inside driver.target()
    assert "tcdsl.runtime.kernel" in graph["tcdsl.dispatch"]


def test_no_import_cycle(graph):
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for x in sorted(graph[m]):
            if state.get(x) == 1:
                pytest.fail("import cycle: " + " -> ".join(stack[stack.index(x):] + [x]))
            if x not in state:
                visit(x)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)


def _reach(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for x in graph[todo.pop()] - seen:
            seen.add(x)
            todo.append(x)
    return seen


def test_the_runtime_imports_no_compiler_module(graph):
    for m in graph:
        if m.startswith("tcdsl.runtime"):
            bad = sorted(x for x in _reach(graph, m) if x.startswith(COMPILER))
            assert not bad, f"{m} reaches {bad}"
    # and the package itself hands the compiler's names out lazily
    assert not [x for x in _reach(graph, "tcdsl") if x.startswith(COMPILER)]


def test_no_file_is_over_600_lines():
    long = {str(p.relative_to(ROOT)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, long


BLOCK = textwrap.dedent("""
    import sys

    class Blocked:
        def find_spec(self, name, path=None, target=None):
            if name.startswith(tuple(sys.argv[1].split(","))):
                raise ImportError(f"{name} is blocked")

    sys.meta_path.insert(0, Blocked())
""")

RUN_STORED = BLOCK + textwrap.dedent("""
    import json
    import numpy as np
    from tcdsl.errors import TcError
    from tcdsl.runtime.kernel import load

    k = load(sys.argv[2])
    inputs = [np.asarray(x, dtype=np.float32) for x in json.loads(sys.argv[3])]
    out = {"result": k(*inputs).tolist(), "again": k(*inputs).tolist(), "hits": k._hits[0]}
    try:
        k(*[x[:0] for x in inputs[:1]], *inputs[1:])
    except TcError as e:
        out["zero"] = str(e)
    out["modules"] = sorted(m for m in sys.modules if m.startswith("tcdsl"))
    print(json.dumps(out))
""")


def _run(code: str, *args: str, **env) -> dict:
    r = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={**os.environ, **env})
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.splitlines()[-1])


def test_a_kernel_from_the_disk_cache_runs_with_the_runtime_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("TCDSL_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TCDSL_DISK_CACHE", "1")
    tcdsl.compile(ELMAN)
    (entry,) = tmp_path.glob("*.json")
    inputs = elman_inputs(np.random.default_rng(0), 4, 3, 5, 6)
    got = _run(RUN_STORED, ",".join(COMPILER + ("islpy", "lark")), str(entry), json.dumps([x.tolist() for x in inputs]))
    np.testing.assert_allclose(np.array(got["result"], np.float32), reference.elman_rnn(*inputs), rtol=1e-5, atol=1e-5)
    assert got["again"] == got["result"] and got["hits"] == 2  # the second call took the fast path
    assert "a size of 0 needs the compiler's bounds check" in got["zero"]
    assert all(m.startswith(("tcdsl.runtime", "tcdsl.errors", "tcdsl.source")) or m == "tcdsl"
               for m in got["modules"]), got["modules"]


LUT = "def lut(float(N) T, int32(M) I) -> (O) { O(m) = T(I(m)) }"

RUN_CHECKED = BLOCK + textwrap.dedent("""
    import numpy as np
    from tcdsl.errors import TcError
    from tcdsl.runtime.kernel import load

    k = load(sys.argv[2])
    print(k(np.ones(3, np.float32), np.array([0, 2], np.int32)).tolist())
    try:
        k(np.ones(3, np.float32), np.array([0, 3], np.int32))
    except TcError as e:
        print(json.dumps(str(e).splitlines()[0]))
""").replace("import numpy as np", "import json\nimport numpy as np", 1)


def test_a_checked_kernel_from_the_disk_cache_raises_with_the_runtime_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("TCDSL_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TCDSL_DISK_CACHE", "1")
    tcdsl.compile(LUT, options={"checked": True})
    (entry,) = tmp_path.glob("*.json")
    message = _run(RUN_CHECKED, ",".join(COMPILER), str(entry))
    assert message.startswith("<string>:1:") and "'T' is read out of bounds" in message, message


def test_the_front_end_needs_no_tvm():
    code = BLOCK + textwrap.dedent("""
        import json
        from tcdsl import driver
        from tcdsl.source import Source
        fe = driver.frontend(Source.load(sys.argv[2]))
        print(json.dumps([fe.name, "tvm" in sys.modules]))
    """)
    assert _run(code, "tvm,tvm_ffi", str(ELMAN)) == ["elman_rnn", False]


def test_the_listed_slow_cases_name_test_functions_that_exist():
    """tests/slow_cases.txt (tests/conftest.py) names test cases by node id: each
    names a test file and a test function in it, so that no entry is a typo."""
    from conftest import _listed_slow_cases

    root = Path(__file__).resolve().parent.parent
    cases = _listed_slow_cases()
    assert cases
    for case in cases:
        file, function = case.split("::")
        tree = ast.parse((root / file).read_text(encoding="utf-8"))
        names = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
        assert function.split("[")[0] in names, case
