"""Guard pages: a kernel that touches memory outside its tensors faults.

``guarded(shape, dtype, direction)`` places a NumPy array in an anonymous
mapping next to a ``PROT_NONE`` page: with ``direction="after"`` the array
ends exactly where that page starts (a read or write one element past the
end is a SIGSEGV), with ``"before"`` it starts exactly where the page ends
(one element before the start faults).  Inputs are made read-only
(``PROT_READ``) once filled, so a write into an input faults too.  Outputs
are passed with ``out=`` (zeroed, guarded the same way); the kernel's own
allocation of outputs is exercised by a call without ``out=`` as well.

A *case* is a JSON object::

    {"id": "...", "source": TC text, "entry": name or null,
     "sizes": {size: value} or null ("*": the value of the sizes not given, 3 by default),
     "settings": [{size: value}, ...] instead of "sizes": one compile, run with each
                 (an entry {"sizes": ..., "inputs": ...} brings its own inputs),
     "corpus": name of a tests/programs/cases.py case (its inputs) or absent,
     "inputs": [{"dtype", "shape", "data"}] (explicit inputs) or absent,
     "seed": 0, "mode": "never", "directions": ["after", "before"],
     "expect": "agree" (default) or "error" (the only right outcome is a TcError),
     "poke": null | "edge" | "past" (tests of the harness: read the byte of the first
             input at its guard page; "past": then the byte beyond it, which must fault)}

:func:`run_cases` runs a batch in one child process (``python tests/guard.py
--child``); each case's outcome is one of

* ``works``: every call under every direction agrees with the reference
  interpreter (``tcdsl.testing.evaluate``);
* ``refused``: a ``TcError`` (compile or call);
* ``unjudged``: the interpreter finds a read out of bounds (undefined
  behaviour) and the kernel ran without a fault: nothing to compare;
* ``mismatch``, ``failure`` (an exception other than ``TcError``), ``fault``
  (a signal killed the process running the case), ``hang``.

Those four, and anything but ``refused`` for ``expect: "error"``, are
failures (:func:`failures`).  The child imports the compiler once and forks
a process that runs the cases, naming each in a state file before it starts;
when that process dies, the child records the case it was running (rerun
alone in a fresh fork when other cases ran before it: an earlier case could
have corrupted memory), with the signal and the call (stderr lines
``guard: ...``), and forks again from the next case.  ``python
tests/guard.py FILE.tc [--entry E] [--sizes N=3,M=2]`` checks one program
from the command line.
"""
from __future__ import annotations

import ctypes
import json
import math
import mmap
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PAGE = mmap.PAGESIZE
DIRECTIONS = ("after", "before")
BAD = ("mismatch", "failure", "fault", "hang")

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.mprotect.restype = ctypes.c_int
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.munmap.restype = ctypes.c_int
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_MAP_FAILED = ctypes.c_void_p(-1).value
PROT_NONE = 0


class _Mapping:
    """An anonymous mapping, unmapped when the last array on it is collected."""

    def __init__(self, length: int):
        addr = _libc.mmap(None, length, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
        if addr in (None, _MAP_FAILED):
            raise OSError(ctypes.get_errno(), "mmap failed")
        self.addr, self.length = addr, length

    def protect(self, offset: int, length: int, prot: int) -> None:
        if length and _libc.mprotect(self.addr + offset, length, prot) != 0:
            raise OSError(ctypes.get_errno(), "mprotect failed")

    def __del__(self):
        _libc.munmap(self.addr, self.length)


def guarded(shape, dtype, direction: str = "after") -> np.ndarray:
    """A C-contiguous zeroed array of ``shape``/``dtype`` that ends exactly at a
    PROT_NONE page (``"after"``) or starts exactly after one (``"before"``).
    ``guard_info(a)`` gives the guard page's address."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, not {direction!r}")
    dtype = np.dtype(dtype)
    shape = tuple(int(s) for s in shape)
    nbytes = math.prod(shape) * dtype.itemsize
    data_pages = max(1, -(-nbytes // PAGE))
    m = _Mapping((data_pages + 1) * PAGE)
    if direction == "after":
        m.protect(data_pages * PAGE, PAGE, PROT_NONE)
        start, guard = m.addr + data_pages * PAGE - nbytes, m.addr + data_pages * PAGE
    else:
        m.protect(0, PAGE, PROT_NONE)
        start, guard = m.addr + PAGE, m.addr
    buf = (ctypes.c_char * max(nbytes, 1)).from_address(start)
    buf._mapping = m  # the mapping lives as long as the buffer (and the arrays on it)
    a = np.frombuffer(buf, dtype=np.uint8, count=nbytes).view(dtype).reshape(shape)
    _GUARDS[id(buf)] = (guard, direction)
    assert a.ctypes.data == start and a.flags.c_contiguous
    return a


_GUARDS: dict[int, tuple[int, str]] = {}


def _base_buffer(a: np.ndarray):
    b = a
    while isinstance(b, np.ndarray):
        b = b.base
    return b


def guard_info(a: np.ndarray) -> tuple[int, str]:
    """(address of the guard page, direction) of an array made by :func:`guarded`."""
    return _GUARDS[id(_base_buffer(a))]


def guarded_copy(x: np.ndarray, direction: str, read_only: bool = True) -> np.ndarray:
    """``x`` copied into a guarded array; ``read_only``: its pages are then
    PROT_READ (a write into it faults)."""
    x = np.asarray(x)
    a = guarded(x.shape, x.dtype, direction)
    a[...] = x
    if read_only and a.nbytes:
        m = _base_buffer(a)._mapping
        m.protect(PAGE if direction == "before" else 0, m.length - PAGE, mmap.PROT_READ)
    return a


# =================================================================== the child
def _inputs_of(case: dict, kernel, sizes: dict[str, int], given: dict[str, int]) -> list[np.ndarray]:
    if case.get("inputs") is not None:
        return [np.array(x["data"], dtype=x["dtype"]).reshape(x["shape"]) for x in case["inputs"]]
    if case.get("corpus"):
        sys.path.insert(0, str(ROOT / "tests" / "programs"))
        import cases  # noqa: PLC0415

        c = cases.by_name(case["corpus"])
        return c.make_inputs(np.random.default_rng(case.get("seed", 0)), **given)  # the sizes it takes
    rng = np.random.default_rng(case.get("seed", 0))
    out = []
    for p in kernel.signature.inputs:
        shape = tuple(d if isinstance(d, int) else sizes[d] if isinstance(d, str) else _linear(d, sizes)
                      for d in p.dims)
        if p.dtype.startswith("float"):
            out.append(rng.standard_normal(shape).astype(p.dtype))
        elif p.dtype == "bool":
            out.append(rng.integers(0, 2, shape).astype(bool))
        else:  # small values: integer tensors are often indices
            out.append(rng.integers(0, 2, shape).astype(p.dtype))
    return out


def explicit(x: np.ndarray) -> dict:
    """An input for a case's ``inputs``."""
    return {"dtype": str(x.dtype), "shape": list(x.shape), "data": x.ravel().tolist()}


def _linear(d, sizes: dict[str, int]) -> int:
    return int(d.const + sum(c * sizes[s] for s, c in d.coeffs))


def _compare(got, want, where: str) -> str | None:
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    if len(got) != len(want):
        return f"{where}: {len(got)} outputs, the interpreter {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g)
        if g.shape != w.shape or g.dtype != w.dtype:
            return f"{where}: output {k}: {g.shape} {g.dtype}, the interpreter {w.shape} {w.dtype}"
        if w.dtype.kind in "fc":
            ok = np.allclose(g.astype(np.float64), w.astype(np.float64), rtol=1e-3, atol=1e-3, equal_nan=True)
        else:
            ok = np.array_equal(g, w)
        if not ok:
            return f"{where}: output {k} differs from the interpreter:\n{g}\nvs\n{w}"
    return None


def _poke(a: np.ndarray, which: str, direction: str) -> int:
    """Read one byte of ``a`` through ctypes: its element at the guarded edge
    (the last one, after; the first one, before); then, for ``past``, the
    byte just outside it, which must fault."""
    edge = a.ctypes.data + a.nbytes - 1 if direction == "after" else a.ctypes.data
    value = ctypes.c_uint8.from_address(edge).value
    if which == "past":
        print(f"poke: the edge byte of a {direction}-guarded input read; now the byte outside it", file=sys.stderr,
              flush=True)
        value = ctypes.c_uint8.from_address(edge + (1 if direction == "after" else -1)).value
    return value


def run_case(case: dict) -> tuple[str, str]:
    """(outcome, detail) of one case, in this process (a fault kills it).
    A case with ``settings`` (a list of size dicts) is compiled once and run
    with each: the first outcome other than ``works`` is the case's."""
    import warnings  # noqa: PLC0415

    import tcdsl  # noqa: PLC0415
    from tcdsl import TcError  # noqa: PLC0415

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            kernel = tcdsl.compile(case["source"], case.get("entry"), specialize=case.get("mode", "never"),
                                   options=case.get("options"))
        except TcError as e:
            return "refused", f"compile: {type(e).__name__}: {str(e).splitlines()[0]}"
        except Exception as e:  # noqa: BLE001
            return "failure", f"compile: {type(e).__name__}: {e}"
        results = []
        for k, setting in enumerate(case.get("settings") or [case.get("sizes") or {}]):
            if "inputs" in setting:  # {"sizes": ..., "inputs": ...}: this setting's own inputs
                results.append(_run_setting(dict(case, inputs=setting["inputs"]), kernel, setting["sizes"], k))
            else:
                results.append(_run_setting(case, kernel, setting, k))
    return next((r for r in results if r[0] != "works"), results[0])


def _run_setting(case: dict, kernel, given: dict, index: int) -> tuple[str, str]:
    from tcdsl import TcError  # noqa: PLC0415
    from tcdsl.testing import OutOfBoundsRead, TooLarge, evaluate  # noqa: PLC0415

    directions = case.get("directions") or list(DIRECTIONS)
    checked = kernel.frontend.checked
    names = [s for s in checked.sizes if s not in checked.derived]  # (derived sizes: computed by the call)
    default = given.get("*", case.get("size", 3))
    sizes = {s: default for s in names} | {k: v for k, v in given.items() if k in names}
    try:
        inputs = _inputs_of(dict(case, seed=case.get("seed", 0) + index), kernel, sizes, given)
    except Exception as e:  # noqa: BLE001
        return "failure", f"making inputs: {type(e).__name__}: {e}"
    carried = {d for p in kernel.signature.inputs for d in p.dims if isinstance(d, str)}
    carried |= {s for p in kernel.signature.inputs for d in p.dims if not isinstance(d, (str, int))
                for s, _ in d.coeffs}
    free = {s: v for s, v in sizes.items() if s not in carried and s not in kernel.fixed}
    want: Any = None
    try:
        want = evaluate(case["source"], inputs, case.get("entry"), sizes=free)
    except (OutOfBoundsRead, TooLarge) as e:
        want = e
    except TcError as e:
        want = e
    except Exception as e:  # noqa: BLE001
        return "failure", f"interpreter (sizes {sizes}): {type(e).__name__}: {e}"
    ran = []
    for direction in directions:
        g_inputs = [guarded_copy(x, direction) for x in inputs]
        if case.get("poke"):
            _poke(g_inputs[0], case["poke"], direction)
        calls = [None]  # the kernel's own outputs
        if isinstance(want, np.ndarray | tuple):  # and twice into guarded out= arrays (the fast path's too)
            ws = want if isinstance(want, tuple) else (want,)
            calls += [tuple(guarded(w.shape, w.dtype, direction) for w in ws) for _ in range(2)]
        for k, out in enumerate(calls):
            where = f"{direction}, call {k + 1}{' (out=)' if out else ''}, sizes {sizes}"
            print(f"guard: {where}", file=sys.stderr, flush=True)  # on a fault, the last such line names the call
            try:
                if out is not None:
                    got = kernel(*g_inputs, out=out if len(out) > 1 else out[0], **free)
                else:
                    got = kernel(*g_inputs, **free)
            except TcError as e:
                also = "" if not isinstance(want, np.ndarray | tuple) else ", though the interpreter ran"
                return "refused", f"call ({where}){also}: {type(e).__name__}: {str(e).splitlines()[0]}"
            except Exception as e:  # noqa: BLE001
                return "failure", f"call ({where}): {type(e).__name__}: {e}"
            if isinstance(want, Exception):
                ran.append(where)
                continue
            bad = _compare(got, want, where)
            if bad:
                return "mismatch", bad
    if case.get("expect") == "error":
        return "mismatch", f"expected a TcError; the kernel ran ({ran[0] if ran else 'every call'})" + (
            f"; the interpreter: {type(want).__name__}: {want}" if isinstance(want, Exception) else "")
    if isinstance(want, TcError):
        return "mismatch", f"the kernel ran ({ran[0]}), the interpreter raised {type(want).__name__}: {want}"
    if isinstance(want, Exception):
        return "unjudged", f"sizes {sizes}: the interpreter: {type(want).__name__}: {want}"
    return "works", ""


def _forked(cases: list[dict], indices, tmp: Path, results: Path, per_case: float) -> tuple[Any, int | None, str]:
    """Run ``cases[i]`` for ``i`` in ``indices`` in a forked process, each
    outcome appended to ``results``.  Returns (exit code, or "hang"; the
    index of the case running when the process died or hung; the tail of its
    stderr)."""
    state, err = tmp / "state", tmp / "stderr"
    state.write_text("")
    err.write_text("")
    pid = os.fork()
    if pid == 0:  # the child: a fault here leaves the parent (and its imports) intact
        code = 0
        try:
            fd = os.open(err, os.O_WRONLY | os.O_TRUNC)
            os.dup2(fd, 2)
            for i in indices:
                with state.open("w") as f:
                    f.write(f"{i} {time.time()}")
                print(f"guard: case {cases[i]['id']}", file=sys.stderr, flush=True)
                outcome, detail = run_case(cases[i])
                with results.open("a") as f:
                    f.write(json.dumps({"index": i, "outcome": outcome, "detail": detail}) + "\n")
        except BaseException:  # noqa: BLE001
            import traceback  # noqa: PLC0415

            traceback.print_exc()
            code = 3
        finally:
            sys.stderr.flush()
            os._exit(code)
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            break
        try:
            running, since = state.read_text().split()
            if time.time() - float(since) > per_case:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                code = "hang"
                break
        except ValueError:  # (not written yet)
            pass
        time.sleep(0.05)
    try:
        culprit = int(state.read_text().split()[0])
    except (ValueError, IndexError):
        culprit = None
    return code, culprit, err.read_text(errors="replace")


def child(cases_path: Path, results: Path, per_case: float) -> None:
    """The child process of :func:`run_cases`: imports the compiler once, then
    forks a process that runs the cases; after a fault or a hang it records the
    case that was running (rerun alone in a fresh fork when other cases ran
    before it in the same process) and forks again from the next case."""
    import tcdsl  # noqa: F401, PLC0415  (imported once, before the forks)
    import tcdsl.testing  # noqa: F401, PLC0415

    cases = json.loads(cases_path.read_text())
    tmp = cases_path.parent / "child"  # removed with the parent's temporary directory
    tmp.mkdir(exist_ok=True)
    start = 0
    while start < len(cases):
        code, culprit, err = _forked(cases, range(start, len(cases)), tmp, results, per_case)
        if code == 0 or culprit is None:
            break
        kind = "hang" if code == "hang" else "fault" if code < 0 else "failure"
        detail = f"{_signal_name(code)} while running this case" if code != "hang" else \
            f"killed after {per_case:.0f} s"
        if culprit != start:
            again, _, _ = _forked(cases, [culprit], tmp, tmp / "alone.jsonl", per_case)
            if again == 0:
                detail += " (alone it ran: an earlier case of the batch may have corrupted memory)"
        if err.strip():
            detail += f"\n--- stderr (abridged):\n{_abridged(err)}"
        with results.open("a") as f:
            f.write(json.dumps({"index": culprit, "outcome": kind, "detail": detail}) + "\n")
        start = culprit + 1


def _abridged(err: str) -> str:
    """A dead child's stderr since its last case began: the harness's own
    lines (the last 3: which call) and the top of any backtrace."""
    lines = err.splitlines()
    starts = [k for k, ln in enumerate(lines) if ln.startswith("guard: case ")]
    lines = lines[starts[-1] + 1:] if starts else lines
    ours = [ln for ln in lines if ln.startswith(("guard:", "poke:"))][-3:]
    rest = [ln for ln in lines if not ln.startswith(("guard:", "poke:"))]
    return "\n".join(ours + rest[:8] + (["  ..."] if len(rest) > 8 else []))


# ================================================================== the parent
def _signal_name(code) -> str:
    if isinstance(code, int) and code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return f"exit status {code}"


def run_cases(cases: list[dict], timeout_per_case: float = 300.0) -> list[dict]:
    """Run ``cases`` in one child process (``python tests/guard.py --child``).
    Returns one record per case, in order: its ``id``, ``source``,
    ``outcome`` and ``detail``."""
    cases = [dict(c, id=c.get("id") or f"case {i}") for i, c in enumerate(cases)]
    records: dict[int, dict] = {}
    with tempfile.TemporaryDirectory(prefix="tcdsl-guard-") as tmp_:
        tmp = Path(tmp_)
        cases_path, results = tmp / "cases.json", tmp / "results.jsonl"
        cases_path.write_text(json.dumps(cases))
        results.touch()
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(cases_path), "--results", str(results),
               "--per-case", str(timeout_per_case)]
        try:
            proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                                  timeout=timeout_per_case * len(cases) + 120)
            problem = f"the child stopped: {_signal_name(proc.returncode)}\n{proc.stderr[-3000:]}" \
                if proc.returncode else "no result"
        except subprocess.TimeoutExpired:
            problem = "the child did not finish"
        for line in results.read_text().splitlines():
            r = json.loads(line)
            records[r["index"]] = {"outcome": r["outcome"], "detail": r["detail"]}
    missing = {"outcome": "failure", "detail": problem if len(records) < len(cases) else ""}
    return [{"id": c["id"], "source": c["source"], "outcome": records.get(i, missing)["outcome"],
             "detail": records.get(i, missing)["detail"]} for i, c in enumerate(cases)]


def failures(records: list[dict], cases: list[dict] | None = None) -> list[dict]:
    """The records that fail: a fault, a hang, a wrong number, a non-TcError
    exception; for a case with ``expect: "error"``, anything but refused."""
    expect = {c.get("id"): c.get("expect", "agree") for c in cases or []}
    return [r for r in records if r["outcome"] in BAD
            or expect.get(r["id"]) == "error" and r["outcome"] != "refused"]


def report(records: list[dict]) -> str:
    """A failure report: each record's id, outcome and detail, and its program."""
    return "\n".join(f"=== {r['id']}: {r['outcome']}: {r['detail']}\n--- program:\n{r['source']}" for r in records)


def assert_all_work(cases: list[dict]) -> None:
    """Run ``cases`` under guard pages (:func:`run_cases`) and fail unless
    every one of them runs and agrees with the reference."""
    records = run_cases(cases)
    bad = failures(records, cases)
    assert not bad, report(bad)
    assert all(r["outcome"] == "works" for r in records), counts(records)


def counts(records: list[dict]) -> str:
    c: dict[str, int] = {}
    for r in records:
        c[r["outcome"]] = c.get(r["outcome"], 0) + 1
    return ", ".join(f"{k}: {v}" for k, v in sorted(c.items()))


# ==================================================================== corpora
def example_cases(sizes=(3,)) -> list[dict]:
    """Every def of every .tc file under examples/, run with every size
    ``sizes[0]``, then ``sizes[1]``..."""
    import re  # noqa: PLC0415

    out = []
    for path in sorted((ROOT / "examples").rglob("*.tc")):
        text = path.read_text(encoding="utf-8")
        for name in re.findall(r"(?m)^\s*def\s+(\w+)", text):
            rel = path.relative_to(ROOT)
            out.append({"id": f"{rel}:{name}", "source": text, "entry": name,
                        "settings": [{"*": n} for n in sizes]})
    return out


def corpus_cases(settings: int = 1) -> list[dict]:
    """The cases of tests/programs/cases.py, each with its first ``settings`` size settings."""
    sys.path.insert(0, str(ROOT / "tests" / "programs"))
    import cases  # noqa: PLC0415

    out = []
    for c in cases.CASES:
        text = (ROOT / "tests" / "programs" / c.file).read_text(encoding="utf-8")
        for k, sizes in enumerate(c.sizes[:settings]):
            out.append({"id": f"corpus:{c.name}[{k}]", "source": text, "entry": c.entry, "sizes": sizes,
                        "corpus": c.name, "seed": k})
    return out


def main(argv: list[str]) -> int:
    import argparse  # noqa: PLC0415

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file", nargs="?", help="a .tc file: check one program (or every def with --entry omitted)")
    ap.add_argument("--entry")
    ap.add_argument("--sizes", default="", help="N=3,M=2 (default: every size 3)")
    ap.add_argument("--mode", default="never")
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--results", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--per-case", type=float, default=300.0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        sys.path.insert(0, str(ROOT))
        child(args.child, args.results, args.per_case)
        return 0
    if not args.file:
        ap.error("give a .tc file")
    import re  # noqa: PLC0415

    text = Path(args.file).read_text(encoding="utf-8")
    sizes = {k: int(v) for k, v in (kv.split("=") for kv in args.sizes.split(",") if kv)}
    entries = [args.entry] if args.entry else re.findall(r"(?m)^\s*def\s+(\w+)", text)
    cases = [{"id": f"{args.file}:{e}", "source": text, "entry": e, "sizes": sizes, "mode": args.mode}
             for e in entries]
    records = run_cases(cases)
    for r in records:
        print(f"{r['id']}: {r['outcome']}" + (f": {r['detail']}" if r["detail"] else ""))
    return 1 if failures(records) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
