"""Static bounds checks (tcdsl/polyhedral/bounds.py): a read out of bounds
for every size is an error; one out of bounds for some sizes is a warning
with its location and a counterexample (an error under
``options={"strict_bounds": True}``), and calls with those sizes are refused;
the corpus programs that are in bounds compile without a warning."""
from __future__ import annotations

import pathlib
import re
import sys
import warnings

import numpy as np
import pytest

import tcdsl
from tcdsl import TcSemanticError, TcShapeError
from tcdsl.driver import frontend
from tcdsl.errors import TcWarning
from tcdsl.polyhedral.bounds import check_bounds
from tcdsl.polyhedral.model import build_model
from tcdsl.sema.check import check
from tcdsl.sema.ranges import infer_ranges
from tcdsl.source import Source
from tcdsl.syntax.parse import parse
from tcdsl.testing import evaluate

ROOT = pathlib.Path(__file__).resolve().parents[1]
PROGRAMS = ROOT / "tests" / "programs"
sys.path.insert(0, str(PROGRAMS))
import cases  # noqa: E402  (tests/programs/cases.py)

# The Elman RNN with the recurrence also at t = 0 (islpy notes, section 10)
BROKEN_ELMAN = """def elman_rnn(float(T,B,Ci) input, float(B,Co) h0, float(Ci,Co) i2h,
              float(Co,Co) h2h) -> (hidden) {
  for t in T {
    hidden(t,b,co) +=! h2h(ci,co) * h0(b,ci)
    hidden(t,b,co) += h2h(ci,co) * hidden(t-1,b,ci)
    hidden(t,b,co) += i2h(ci,co) * input(t,b,ci)
  }
}
"""


def bounds_warnings(source, entry=None, strict_bounds=False) -> list[str]:
    """The TcWarnings of the front end (parse ... build_model, check_bounds)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        frontend(Source.load(source), entry, strict_bounds=strict_bounds)
    return [str(w.message) for w in caught if issubclass(w.category, TcWarning)]


# Reads past the end of A whenever M > N: compiled, with a warning, and
# calls with such sizes are refused
SHORT_A = "def f(float(N) A, float(M) C) -> (B) {\n  B(i) = A(i) + C(i) where i in 0:M\n}"


def test_a_read_out_of_bounds_for_every_size_is_an_error():
    with pytest.raises(TcSemanticError) as info:
        tcdsl.compile(BROKEN_ELMAN)
    assert (info.value.line, info.value.col) == (5, 36)
    head, line, caret = str(info.value).split("\n")
    assert re.search(r"^<string>:5:36: 'hidden' is read out of bounds for every size: for sizes T=\d+, B=\d+, "
                     r"Ci=\d+, Co=\d+ at t=0, b=\d+, co=\d+, ci=\d+: hidden\(-1, \d+, \d+\), "
                     r"but 'hidden' has size \(T, B, Co\)$", head), head
    assert line == BROKEN_ELMAN.splitlines()[4]
    assert caret == " " * 35 + "^" * len("hidden(t-1,b,ci)")


@pytest.mark.parametrize("source", [
    "def f(float(N) A) -> (B) { B(i) = A(i) * 2 where i in 0:N+3 }",
    "def f(float(N) A) -> (B) { B(i) = A(i + 1) where i in 0:N }",
    "def f(float(N) A) -> (B) { B(i) = i >= 0 ? A(i - 1) : 0 where i in 0:N }",
    "def f(float(T, B) x) -> (y) { for t in T { y(t, b) = x(t + 1, b) } }",
])
def test_reads_out_of_bounds_for_every_size_are_refused(source):
    with pytest.raises(TcSemanticError, match="is read out of bounds for every size"):
        tcdsl.compile(source)


def test_compile_warns_where_only_some_sizes_read_out_of_bounds():
    with pytest.warns(TcWarning, match=r"^<string>:2:10: 'A' may be read out of bounds"):
        tcdsl.compile(SHORT_A)


def test_warning_names_the_access_and_a_counterexample():
    (msg,) = bounds_warnings(SHORT_A)
    head, line, caret = msg.split("\n")
    m = re.search(r"^<string>:2:10: 'A' may be read out of bounds: for sizes N=(\d+), M=(\d+) at i=(\d+): "
                  r"A\((\d+)\), but 'A' has size \(N\)$", head)
    assert m, head
    n, size_m, i, idx = map(int, m.groups())
    assert idx == i < size_m and idx >= n  # a real counterexample
    assert line == SHORT_A.splitlines()[1]
    assert caret == " " * 9 + "^" * len("A(i)")


def test_warning_names_the_file(tmp_path):
    path = tmp_path / "bad.tc"
    path.write_text(SHORT_A)
    (msg,) = bounds_warnings(path)
    assert msg.startswith(f"{path}:2:10: 'A' may be read out of bounds: for sizes N=")


def test_strict_bounds_is_an_error():
    with pytest.raises(TcSemanticError) as info:
        tcdsl.compile(SHORT_A, options={"strict_bounds": True})
    assert (info.value.line, info.value.col) == (2, 10)
    assert "'A' may be read out of bounds" in info.value.message and "but 'A' has size (N)" in info.value.message


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_calls_with_sizes_that_read_out_of_bounds_are_refused(mode):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TcWarning)
        k = tcdsl.compile(SHORT_A, specialize=mode)
    a, c = np.arange(5, dtype=np.float32), np.ones(3, np.float32)
    np.testing.assert_array_equal(k(a, c), a[:3] + 1)  # M <= N: in bounds
    np.testing.assert_array_equal(k(a, np.ones(5, np.float32)), a + 1)
    with pytest.raises(TcShapeError, match=r"^sizes N=3, M=5: <string>:2:10: 'A' would be read out of bounds: "
                                           r"for sizes N=3, M=5 at i=[34]: A\([34]\), but 'A' has size \(N\)"):
        k(c, a)
    with pytest.raises(TcShapeError):  # again: the refusal is not cached as a pass
        k(c, a)


def test_a_loaded_kernel_refuses_the_same_sizes(tmp_path):
    """The sizes a read leaves its tensor for travel with the binary: the
    runtime alone (no compiler) refuses them."""
    from tcdsl.runtime.args import SizeChecks
    from tcdsl.runtime.signature import Signature

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TcWarning)
        k = tcdsl.compile(SHORT_A)
    sig = Signature.from_json(k.signature.to_json())
    assert len(sig.guards) == 1
    checks = SizeChecks(sig)
    checks.check({"N": 5, "M": 5})
    checks.check({"N": 9, "M": 2})
    with pytest.raises(TcShapeError, match=r"^sizes N=4, M=5: <string>:2:10: 'A' would be read out of bounds "
                                           r"for these sizes$"):
        checks.check({"N": 4, "M": 5})


def test_counterexample_is_a_real_one():
    # A(2*i) with i in 0:N reads up to 2N - 2, out of bounds from N = 2 on
    (msg,) = bounds_warnings("def f(float(N) A) -> (B) { B(i) = A(2 * i) where i in 0:N }")
    m = re.search(r"for sizes N=(\d+) at i=(\d+): A\((\d+)\)", msg)
    n, i, idx = map(int, m.groups())
    assert idx == 2 * i and not 0 <= idx < n


@pytest.mark.parametrize("source", [
    # guarded by a select whose condition is affine (then branch, and else branch)
    "def f(float(N) A) -> (B) { B(i) = i > 0 ? A(i - 1) : 0 where i in 0:N }",
    "def f(float(N) A) -> (B) { B(i) = i == 0 ? 0 : A(i - 1) where i in 0:N }",
    "def f(float(N) A) -> (B) { B(i) = (i > 0 && i < N - 1) ? A(i - 1) + A(i + 1) : A(i) where i in 0:N }",
    "def f(float(N) A) -> (B) { B(i) = i > 0 ? (i > 1 ? A(i - 2) : A(i - 1)) : 0 where i in 0:N }",
    # the right operand of && and || is evaluated only where the left one lets it
    "def f(float(N) A) -> (B) { B(i) = (i >= 1 && A(i - 1) > 0.5) ? 1 : 0 where i in 0:N }",
    "def f(float(N) A) -> (B) { B(i) = (i >= N - 1 || A(i + 1) > 0.5) ? 1 : 0 where i in 0:N }",
    "def f(float(N) A) -> (B) { B(i) = !(i < 2) ? A(i - 2) : 0 where i in 0:N }",
    "def f(float(N) A) -> (B) { B(i) = (i < 1 || i > N - 2) ? 0 : A(i - 1) + A(i + 1) where i in 0:N }",
    # guarded by the program: if t == 0 ... else ..., for t in lo:hi
    "def f(float(T, B) x) -> (y) { for t in T { if t == 0 { y(t, b) = x(t, b) } else { y(t, b) = y(t - 1, b) } } }",
    "def f(float(T, B) x) -> (y) {\n y(i, b) = x(i, b) where i in 0:1\n for t in 1:T { y(t, b) = y(t - 1, b) } }",
    # ranges inferred from the reads themselves
    "def f(float(N) A) -> (B) { B(i) = A(i) + A(i + 1) }",
])
def test_guarded_and_inferred_reads_are_in_bounds(source):
    assert bounds_warnings(source) == []


def test_unguarded_or_non_affine_guard_is_refused():
    # the guard reads a tensor: not affine, so the read is checked on the whole domain
    with pytest.raises(TcSemanticError, match=r"'A' is read out of bounds for every size"):
        tcdsl.compile("def f(float(N) A) -> (B) { B(i) = A(i) > 0 ? A(i - 1) : 0 where i in 0:N }")
    # ... unless an affine part of the condition guards it
    assert bounds_warnings("def f(float(N) A) -> (B) { B(i) = (A(i) > 0 && i > 0) ? A(i - 1) : 0 where i in 0:N }") == []


def test_writes_beyond_a_declared_output_size_are_errors():
    with pytest.raises(TcSemanticError, match=r"'B' may be written out of its declared size: for sizes N=1 at i=1: "
                                              r"B\(1\), but 'B' has size \(N\)"):
        tcdsl.compile("def f(float(N) A) -> (float(N) B) { B(i) = A(0) where i in 0:N+1 }")


@pytest.mark.parametrize("name", ["elman_rnn", "qrnn_fo", "lstm", "gru", "matmul", "convolution", "convolution_s2x2",
                                  "batch_matmul", "prefix_sum", "gated_scan", "causal_mean"])
def test_named_corpus_programs_compile_without_warnings(name):
    case = cases.by_name(name)
    assert bounds_warnings(PROGRAMS / case.file, entry=case.entry, strict_bounds=True) == []


def test_corpus_warnings_are_the_known_unchecked_preconditions():
    """Across the corpus, only reads that really depend on an unstated size
    relation warn: `where l in 0:2` over index(L), and tum's Idx(k + 1) with
    `where k in 0:K` over Idx(KP1)."""
    warned = set()
    for file in sorted({c.file for c in cases.CASES}):
        program = parse(Source.load(PROGRAMS / file))  # parse each file once
        for d in program.defs:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                check_bounds(build_model(infer_ranges(check(program, d.name))))
            warned |= {(d.name, re.search(r"'(\w+)' may be read", str(w.message)).group(1)) for w in caught
                       if issubclass(w.category, TcWarning) and "may be read" in str(w.message)}
    assert warned == {("indexing", "index"), ("dots", "Idx")}


# ------------------------------------------------------------- at the call
# Tensors are indexed with int32: sizes that give any tensor more than
# 2**31 - 1 elements are refused before anything is allocated or run.

@pytest.mark.parametrize("mode", ["never", "before-scheduling"])
def test_sizes_overflowing_int32_indexing_are_refused(mode):
    a = np.ones(50_000, np.float32)
    outer = tcdsl.compile("def f(float(N) A, float(M) B) -> (C) { C(i, j) = A(i) * B(j) }", specialize=mode)
    with pytest.raises(TcShapeError, match=r"sizes N=50000, M=50000 give 'C' shape \(50000, 50000\), "
                                           r"2500000000 elements; .*at most 2147483647"):
        outer(a, a)
    via_temp = tcdsl.compile("def f(float(N) A, float(M) B) -> (C) {\n  T(i, j) = A(i) * B(j)\n  C(i) +=! T(i, j)\n}",
                             specialize=mode)
    with pytest.raises(TcShapeError, match=r"give 'T' shape \(50000, 50000\)"):
        via_temp(a, a)
    with pytest.raises(TcShapeError, match=r"give 'T' shape"):
        evaluate(via_temp.frontend.source.text, [a, a])
    assert outer.cache_info()["compiles"] == (1 if mode == "never" else 0)


def test_largest_supported_tensor_is_accepted():
    from tcdsl.codegen.signature import MAX_ELEMENTS, check_index_range

    fe = frontend(Source("def f(float(N) A, float(M) B) -> (C) { C(i, j) = A(i) * B(j) }"))
    check_index_range(fe.ranges, {"N": 1, "M": MAX_ELEMENTS})
    with pytest.raises(TcShapeError):
        check_index_range(fe.ranges, {"N": 1, "M": MAX_ELEMENTS + 1})


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
@pytest.mark.parametrize("name, sizes", [
    ("elman_rnn", {"T": 0, "B": 2, "Ci": 3, "Co": 4}),
    ("qrnn_fo", {"T": 0, "B": 2, "I": 3, "H": 4}),
    ("lstm", {"T": 0, "B": 2, "I": 3, "H": 4}),
    ("prefix_sum", {"N": 1, "M": 0}),
    ("matmul", {"M": 3, "N": 2, "K": 0}),
    ("batch_matmul", {"B": 0, "N": 2, "M": 2, "K": 2}),
])
def test_zero_sizes_give_empty_or_identity_outputs(name, sizes, mode):
    case = cases.by_name(name)
    inputs = case.make_inputs(np.random.default_rng(0), **sizes)
    got = tcdsl.compile(PROGRAMS / case.file, case.entry, specialize=mode)(*inputs)
    want = evaluate(PROGRAMS / case.file, inputs, case.entry)
    got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)
    if "T" in sizes:
        assert all(0 in g.shape for g in got if g.ndim == 3)


@pytest.mark.parametrize("mode", ["never", "before-scheduling"])
def test_zero_sizes_that_would_access_out_of_bounds_are_refused(mode):
    # proved for sizes >= 1, the compiled code leaves out what that implies: with
    # N = 0, `where i in 0:1` still writes row 0 of the empty s, and x(0) reads
    # the empty x; such calls are refused before running
    case = cases.by_name("prefix_sum")
    k = tcdsl.compile(PROGRAMS / case.file, case.entry, specialize=mode)
    with pytest.raises(TcShapeError, match=r"sizes N=0, M=3: .*scans.tc:3:3: 's' would be written out of bounds"):
        k(*case.make_inputs(np.random.default_rng(0), N=0, M=3))
    src = "def f(float(N) x, float(M) y) -> (o) { o(j) = y(j) + x(0) }"
    k = tcdsl.compile(src, specialize=mode)
    y = np.ones(3, np.float32)
    with pytest.raises(TcShapeError, match=r"sizes N=0, M=3: <string>:1:54: 'x' would be read out of bounds: "
                                           r"for sizes N=0, M=3 at j=\d: x\(0\), but 'x' has size \(N\)"):
        k(np.ones(0, np.float32), y)
    np.testing.assert_array_equal(k(np.full(1, 2, np.float32), y), y + 2)
    assert k(np.ones(1, np.float32), np.ones(0, np.float32)).shape == (0,)


# ================================================================ checked mode
# options={"checked": True}: a non-affine or indirect index out of range raises
# TcError (codegen/checks.py) instead of being clamped into the tensor.
LUT = "def lut(float(M) T, int32(N) I) -> (O) {\n  O(i) = T(I(i)) * 2\n}"


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
@pytest.mark.parametrize("bad", [5, -1, 2**31 - 1])
def test_checked_mode_reports_an_indirect_read_out_of_bounds(mode, bad):
    t = np.arange(5, dtype=np.float32)
    idx = np.array([0, 4, 2] * 7 + [bad] + [1] * 9, np.int32)  # past a vector of 8 and the scalar tail
    k = tcdsl.compile(LUT, specialize=mode, options={"checked": True})
    with pytest.raises(tcdsl.TcError) as e:
        k(t, idx)
    assert type(e.value) is tcdsl.TcError
    assert str(e.value) == ("<string>:2:12: 'T' is read out of bounds: its index along dimension 0 is not in [0, 5)\n"
                            "  O(i) = T(I(i)) * 2\n           ^^^^")
    ok = np.array([0, 4, 2] * 10, np.int32)
    np.testing.assert_array_equal(k(t, ok), evaluate(LUT, [t, ok]))
    # unchecked, the same index is clamped into T
    clamped = tcdsl.compile(LUT, specialize=mode)(t, idx)
    assert clamped[21] == 2 * min(max(bad, 0), 4)


def test_checked_mode_names_the_file_and_the_dimension(tmp_path):
    path = tmp_path / "gather.tc"
    path.write_text("def gather(float(N, M) A, int32(K) I) -> (B) {\n  B(k, j) = A(k % N, I(k)) + A(I(k) % N, j)\n}\n")
    k = tcdsl.compile(path, options={"checked": True})
    a = np.ones((3, 4), np.float32)
    np.testing.assert_array_equal(k(a, np.array([0, 3, 1], np.int32)), np.full((3, 4), 2, np.float32))
    with pytest.raises(tcdsl.TcError, match=rf"^{re.escape(str(path))}:2:22: 'A' is read out of bounds: "
                                            r"its index along dimension 1 is not in \[0, 4\)\n"):
        k(a, np.array([0, 4, 1], np.int32))


def test_checked_mode_leaves_untaken_branches_alone():
    # `c ? T(I(i)) : ...` reads T only where c holds; at i = 0 the untaken
    # branch's I(i - 1) is not read either
    src = ("def f(float(M) T, int32(N) I) -> (O, P) {\n  O(i) = I(i) >= 0 && I(i) < M ? T(I(i)) : -1.0\n"
           "  P(i) = i > 0 ? T(I(i - 1)) : 0.5 where i in 0:N\n}")
    t = np.arange(4, dtype=np.float32)
    k = tcdsl.compile(src, options={"checked": True})
    good = np.array([0, 1, 3, 3, 0, 2, 2, 2, 1, 0, 3], np.int32)
    for g, w in zip(k(t, good), evaluate(src, [t, good])):
        np.testing.assert_array_equal(g, w)
    for bad in (-3, 7):
        with pytest.raises(tcdsl.TcError, match=r"^<string>:3:20: 'T' is read out of bounds"):
            k(t, np.array([0, 1, bad, 3, 0, 2, 2, 2, 1, 0, 3], np.int32))
    o = tcdsl.compile(src.replace("O, P", "O").replace("\n  P(i) = i > 0 ? T(I(i - 1)) : 0.5 where i in 0:N", ""),
                      options={"checked": True})
    bad = np.array([0, -1, 7, 3, 0, 2, 2, 2, 1, 0, 3], np.int32)
    np.testing.assert_array_equal(o(t, bad), [0, -1, -1, 3, 0, 2, 2, 2, 1, 0, 3])


def test_checked_mode_covers_non_affine_indices():
    src = "def f(float(N) A) -> (B) {\n  B(i, j) +=! A(i * j + k) where i in 0:N, j in 0:N, k in 0:2\n}"
    a = np.arange(10, dtype=np.float32)
    plain = tcdsl.compile(src)(a)  # clamped
    assert plain.shape == (10, 10) and plain[9, 9] == 18
    with pytest.raises(tcdsl.TcError, match=r"<string>:2:17: 'A' is read out of bounds: .* not in \[0, 10\)"):
        tcdsl.compile(src, options={"checked": True})(a)


def test_checked_mode_on_many_rows_raises_tc_error_not_runtime_error():
    # checked kernels are serial: TVM's thread pool reports a worker's exception
    # as a RuntimeError ("Task 1 error: ...")
    src = "def f(float(M) T, int32(N, K) I) -> (O) {\n  O(n, k) = T(I(n, k))\n}"
    idx = np.zeros((4096, 16), np.int32)
    idx[3001, 5] = 99
    k = tcdsl.compile(src, options={"checked": True})
    assert "T.parallel" not in k.script
    with pytest.raises(tcdsl.TcError, match="'T' is read out of bounds"):
        k(np.ones(8, np.float32), idx)


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_checked_mode_option_must_be_a_bool(value):
    with pytest.raises(tcdsl.TcError, match="'checked' must be True or False"):
        tcdsl.compile(LUT, options={"checked": value})(np.ones(2, np.float32), np.zeros(2, np.int32))


def _reads_indirectly(case) -> bool:
    return "indirect" in case.tags


# those of cases.representative() by default, every one under ``-m slow``
@pytest.mark.parametrize("case", cases.params([c for c in cases.CASES if _reads_indirectly(c)]))
def test_corpus_with_indirect_reads_runs_checked(case):
    from test_corpus import run_case

    run_case(case, tcdsl.compile(PROGRAMS / case.file, case.entry, options={"checked": True}))


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["never", "before-scheduling"])
@pytest.mark.parametrize("case", cases.CASES, ids=lambda c: c.name)
def test_corpus_runs_checked(case, mode):
    from test_corpus import run_case

    run_case(case, tcdsl.compile(PROGRAMS / case.file, case.entry, specialize=mode, options={"checked": True}))


@pytest.mark.slow
def test_checked_kernel_from_the_disk_cache_still_raises(tmp_path):
    # the callbacks are registered by `import tcdsl`, not by compiling: a fresh
    # process that loads the binary from the disk cache gets the same TcError
    import os
    import subprocess

    code = ("import numpy as np, tcdsl\n"
            f"k = tcdsl.compile({LUT!r}, options={{'checked': True}})\n"
            "try:\n    k(np.ones(3, np.float32), np.array([0, 3], np.int32))\n"
            "except tcdsl.TcError as e:\n    print(type(e).__name__, str(e).splitlines()[0])\n"
            "print(k.cache_info())\n")
    env = {**os.environ, "TCDSL_CACHE_DIR": str(tmp_path), "TCDSL_DISK_CACHE": "1"}
    runs = [subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=300) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr[-2000:]
        assert "TcError <string>:2:12: 'T' is read out of bounds" in r.stdout, r.stdout
    assert "disk_hits=1" in runs[1].stdout or "'disk_hits': 1" in runs[1].stdout, runs[1].stdout
