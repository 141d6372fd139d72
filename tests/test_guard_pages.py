"""Never out of bounds: programs run with their tensors next to PROT_NONE pages.

Every input (read-only) and every ``out=`` output is placed so that it ends
exactly at an inaccessible page, or starts exactly after one
(tests/guard.py); a kernel that reads or writes one element outside a tensor
dies of SIGSEGV.  Cases run in child processes, so a fault fails the test
with the program and the signal instead of killing pytest.  The outcome of
a case is that the kernel agrees with the reference interpreter, or a
``TcError``; a fault, a wrong number or another exception fails.

The default run checks a representative subset; ``-m slow`` runs every def
of examples/ and every case of the corpus (tests/programs/cases.py) in both
directions.  tests/test_fuzz.py runs its random programs through the same
harness.
"""
from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import guard  # noqa: E402

# The programs of issue 16: reads guarded by `&&`, `||` or a nested `?:`
# must not be performed where the guard is false; a read outside an input
# must be refused (TcError at compile or call), never run.
ISSUE_16 = [
    ("and_guard", "def f(float(N) A) -> (B) { B(i) = i >= 1 && A(i-1) > 0.5 ? 1.0 : 0.0 }", "agree"),
    # with the range given, i = 0 is in it: A(-1) must not be read
    ("and_guard_where", "def f(float(N) A) -> (B) { B(i) = i >= 1 && A(i-1) > 0.5 ? 1.0 : 0.0 where i in 0:N }",
     "agree"),
    ("or_guard", "def f(float(N) A) -> (B) { B(i) = i >= N-1 || A(i+1) > 0.5 ? 1.0 : 0.0 where i in 0:N }",
     "agree"),
    # without the where clause, range inference gives i the range [-1, N - 1): refused or run, never a fault
    ("or_guard_inferred", "def f(float(N) A) -> (B) { B(i) = i >= N-1 || A(i+1) > 0.5 ? 1.0 : 0.0 }", "agree"),
    ("nested_select", "def f(float(N) A) -> (B) { B(i) = i >= 2 ? (A(i-2) > 0.5 ? A(i-2) : 0.0) : 0.0 }", "agree"),
    ("nested_select_where",
     "def f(float(N) A) -> (B) { B(i) = i >= 2 ? (A(i-2) > 0.5 ? A(i-2) : 0.0) : 0.0 where i in 0:N }", "agree"),
    ("where_past_the_input", "def f(float(N) A) -> (B) { B(i) = A(i) * 2 where i in 0:N+3 }", "error"),
    ("shifted_read", "def f(float(N) A) -> (B) { B(i) = A(i+1) where i in 0:N }", "error"),
]


# Calls with a size of 0: every rewrite (split selects, padded copies,
# factors, ...) assumes sizes of at least 1; such calls run the program as
# written.  Before that, (c) and (d) wrote the edge piece of a split select
# into an output of 0 rows, (pad) wrote before a padded copy of 0 taps, and
# (mean) gave 0 / 0 for an empty sum.
ZERO_SIZES = [
    ("last_row_select", "def f(float(N,M) x) -> (y) { y(i,j) = i == N-1 ? 1.0 : x(i,j) }",
     [{"N": 0, "M": 5}, {"N": 3, "M": 0}, {"N": 0, "M": 0}, {"N": 3, "M": 4}]),
    ("last_column_select", "def f(float(N,M) x) -> (y) { y(i,j) = j == M-1 ? 1.0 : x(i,j) * 2 }",
     [{"N": 0, "M": 5}, {"N": 3, "M": 0}, {"N": 2, "M": 3}]),
    ("padded_filter_of_no_taps",
     "def f(float(T) x, float(K) w) -> (y) { y(t) +=! (t+k-K+1 >= 0 ? x(t+k-K+1) : 0) * w(k) where t in 0:T, k in 0:K }",
     [{"T": 4, "K": 0}, {"T": 0, "K": 3}, {"T": 5, "K": 2}]),
    ("mean_of_nothing", "def f(float(N,C) x) -> (m) { m(n) +=! x(n,c) / C }", [{"N": 3, "C": 0}, {"N": 2, "C": 3}]),
]
MODES = ("never", "after-scheduling", "before-scheduling", "auto")


def zero_size_cases() -> list[dict]:
    return [{"id": f"zero:{name}:{mode}", "source": src, "settings": settings, "mode": mode}
            for name, src, settings in ZERO_SIZES for mode in MODES]


def issue_cases(sizes=(1, 2, 5, 17)) -> list[dict]:
    return [{"id": f"issue16:{name}", "source": src, "settings": [{"N": n} for n in sizes], "expect": expect}
            for name, src, expect in ISSUE_16]


# The default subset: cheap programs of examples/docs (each language
# feature once), a sample of the corpus, and the programs of issue 16.
DEFAULT_EXAMPLES = ("causal", "concat", "gates", "powers", "masked_max", "firsts", "greedy", "softmax", "rowmax",
                    "shift", "constant_fill", "bind", "casts", "lut", "prefix", "diff", "branches", "reverted",
                    "sel", "scale", "elman_rnn")
DEFAULT_CORPUS = ("copy_2d", "concat", "indexing", "lut_reduce", "cast", "test_type_uint8", "softmax_fused",
                  "tensoraddstrided", "shift1d", "prefix_sum", "gated_scan")


def default_cases() -> list[dict]:
    seen, out = set(), []
    for c in guard.example_cases():
        name = c["id"].rsplit(":", 1)[1]
        if name in DEFAULT_EXAMPLES and name not in seen:
            seen.add(name)
            out.append(c)
    corpus = {c["id"].split(":", 1)[1].split("[")[0]: c for c in guard.corpus_cases()}
    out += [corpus[name] for name in DEFAULT_CORPUS]
    return out


def poke_cases() -> list[dict]:
    """Tests of the harness: read the byte at the guarded edge of an input, or
    (``past``) then the byte just outside it, which must fault."""
    src = "def f(float(N) A) -> (B) { B(i) = A(i) }"
    return [{"id": f"poke:{which}:{d}", "source": src, "sizes": {"N": 5}, "poke": which, "directions": [d]}
            for d in guard.DIRECTIONS for which in ("edge", "past")]


def _check(records: list[dict], cases: list[dict]) -> None:
    bad = guard.failures(records, cases)
    assert not bad, f"{len(bad)} of {len(records)} cases fail ({guard.counts(records)}):\n{guard.report(bad)}"


@pytest.fixture(scope="module")
def default_run():
    """The default run's cases, in one child process (its imports are the cost):
    the subset, the programs of issue 16, and the tests of the harness."""
    cases = default_cases() + issue_cases() + zero_size_cases() + poke_cases()
    records = guard.run_cases(cases)
    return {c["id"]: c for c in cases}, {r["id"]: r for r in records}


# ------------------------------------------------------------ the harness itself
def test_guarded_arrays_touch_their_guard_page():
    for direction in guard.DIRECTIONS:
        for shape, dtype in [((3,), np.float32), ((2, 5), np.int64), ((1024,), np.float32), ((0,), np.float64),
                             ((), np.int16)]:
            a = guard.guarded(shape, dtype, direction)
            page, d = guard.guard_info(a)
            assert d == direction and a.shape == shape and a.dtype == dtype and a.flags.c_contiguous
            if direction == "after":
                assert a.ctypes.data + a.nbytes == page
            else:
                assert a.ctypes.data == page + guard.PAGE
            a[...] = 7  # the array itself is writable
            assert (a == 7).all()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for direction in guard.DIRECTIONS:
        np.testing.assert_array_equal(guard.guarded_copy(x, direction), x)


@pytest.mark.parametrize("direction", guard.DIRECTIONS)
def test_a_read_one_element_outside_faults_and_is_reported(default_run, direction):
    # not vacuous: the byte just outside a guarded input is inaccessible, and
    # the harness reports the fault (with the signal and the program) as a
    # failure, after reading the byte at the edge
    _, records = default_run
    r = records[f"poke:past:{direction}"]
    assert r["outcome"] == "fault" and "SIGSEGV" in r["detail"], r
    assert f"the edge byte of a {direction}-guarded input read" in r["detail"], r
    assert guard.failures([r]) == [r] and "B(i) = A(i)" in guard.report([r])
    # ... and with the edge read alone, the kernel then runs and agrees
    edge = records[f"poke:edge:{direction}"]
    assert edge["outcome"] == "works", edge


def test_a_write_into_a_guarded_input_faults():
    # inputs are read-only once filled: a write into one is a fault too
    code = ("import sys; sys.path.insert(0, 'tests'); import guard, numpy as np\n"
            "a = guard.guarded_copy(np.ones(4, np.float32), 'after')\n"
            "a[0] = 2\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=guard.ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == -signal.SIGSEGV, (r.returncode, r.stderr[-1000:])


# ------------------------------------------------------------------- programs
@pytest.mark.parametrize("name", [name for name, _, _ in ISSUE_16])
def test_issue_16_programs_never_fault(default_run, name):
    cases, records = default_run
    _check([records[f"issue16:{name}"]], [cases[f"issue16:{name}"]])


@pytest.mark.parametrize("name", [name for name, _, _ in ZERO_SIZES])
def test_calls_with_a_size_of_0_never_fault_and_agree(default_run, name):
    cases, records = default_run
    ids = [f"zero:{name}:{mode}" for mode in MODES]
    _check([records[i] for i in ids], [cases[i] for i in ids])


def test_default_subset_under_guard_pages(default_run):
    cases, records = default_run
    mine = default_cases()
    assert len(mine) >= 25, [c["id"] for c in mine]
    got = [records[c["id"]] for c in mine]
    _check(got, mine)
    assert sum(r["outcome"] == "works" for r in got) >= len(mine) - 2, guard.counts(got)


@pytest.mark.slow
def test_every_example_under_guard_pages():
    cases = guard.example_cases(sizes=(1, 3, 17))
    _check(guard.run_cases(cases), cases)


@pytest.mark.slow
def test_the_whole_corpus_under_guard_pages():
    cases = guard.corpus_cases(settings=2)
    _check(guard.run_cases(cases), cases)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["after-scheduling", "before-scheduling"])
def test_the_corpus_specialised_under_guard_pages(mode):
    cases = [dict(c, mode=mode, id=f"{c['id']}/{mode}") for c in guard.corpus_cases()]
    _check(guard.run_cases(cases), cases)
