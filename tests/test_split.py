"""Index-set splitting at a select's affine condition (polyhedral/split.py,
the schedule option ``split_selects``): results against NumPy in every
specialize mode, with and without the option, and the structure it makes."""
from __future__ import annotations

import numpy as np
import pytest

import tcdsl
from tcdsl import driver
from tcdsl.codegen.lower import has_node
from tcdsl.options import parse as parse_options

MODES = ("never", "after-scheduling", "before-scheduling")

CAUSAL = """
def causal(float(B, C, T) x, float(O, C, K) w) -> (y) {
  y(b, o, t) +=! (t + k - K + 1 >= 0 ? x(b, c, t + k - K + 1) : 0) * w(o, c, k) where t in 0:T, k in 0:K
}
"""

# "same" padding: both sides, a condition of two inequalities
PADDED = """
def padded(float(B, C, T) x, float(O, C, K) w) -> (y) {
  y(b, o, t) +=! (t + k - (K - 1) / 2 >= 0 && t + k - (K - 1) / 2 < T ? x(b, c, t + k - (K - 1) / 2) : 0) * w(o, c, k)
    where t in 0:T, k in 0:K
}
"""

# dilation 2, causal
DILATED = """
def dilated(float(B, C, T) x, float(O, C, K) w) -> (y) {
  y(b, o, t) +=! (t - 2 * (K - 1 - k) >= 0 ? x(b, c, t - 2 * (K - 1 - k)) : 0) * w(o, c, k) where t in 0:T, k in 0:K
}
"""


def _conv_ref(x, w, left, dilation=1, right=0):
    B, C, T = x.shape
    O, _, K = w.shape
    xp = np.concatenate([np.zeros((B, C, left), x.dtype), x, np.zeros((B, C, right), x.dtype)], axis=2)
    y = np.zeros((B, O, T), np.float64)
    for k in range(K):
        y += np.einsum("bct,oc->bot", xp[:, :, k * dilation:k * dilation + T], w[:, :, k])
    return y


def _rand(rng, *shape, dtype=np.float32):
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-5, 6, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _compile(src, mode="never", split=True):
    # (pad off: a padding select is otherwise replaced by a padded copy before splitting, polyhedral/pad.py)
    return tcdsl.compile(src, specialize=mode, options={"split_selects": split, "pad": False, "disk_cache": False})


def _run(src, args, mode, split=True):
    return _compile(src, mode, split)(*args)


def _pieces(src, split=True):
    """The update statements' names of the model that is scheduled, per kernel."""
    k = _compile(src, "after-scheduling", split)  # (builds no binary)
    model = driver.model_for(k.frontend, parse_options({"split_selects": split}).schedule)
    return [[s.name for s in kern.stmts if not s.is_init] for kern in model.kernels()]


# (B, C, T, O, K): K larger than T leaves some outputs without any term
CONV_SIZES = [(2, 3, 10, 4, 3), (1, 1, 1, 1, 1), (1, 2, 2, 3, 5), (3, 4, 33, 5, 4)]
CONVS = {"causal": (CAUSAL, lambda x, w, K: _conv_ref(x, w, K - 1)),
         "padded": (PADDED, lambda x, w, K: _conv_ref(x, w, (K - 1) // 2, right=K)),
         "dilated": (DILATED, lambda x, w, K: _conv_ref(x, w, 2 * (K - 1), dilation=2))}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("conv", list(CONVS))
@pytest.mark.slow
def test_conv1d(conv, mode):
    src, ref = CONVS[conv]
    kernels = [_compile(src, mode)] + ([_compile(src, mode, split=False)] if mode == "never" else [])
    rng = np.random.default_rng(0)
    for B, C, T, O, K in CONV_SIZES:
        x, w = _rand(rng, B, C, T), _rand(rng, O, C, K)
        for k in kernels:
            np.testing.assert_allclose(k(x, w), ref(x, w, K), rtol=1e-4, atol=1e-4)


def test_conv_pieces_identity_left_out():
    # the interior (every k reads inside x: t >= K - 1) and the boundary
    # columns; the padding piece multiplies 0: left out; the init still
    # zeroes every y
    assert _pieces(CAUSAL) == [["S0_0", "S0_1"]]
    assert _pieces(CAUSAL, split=False) == [["S0"]]
    assert _pieces(PADDED) == [["S0_0", "S0_1"]]


def test_the_interior_of_a_padded_convolution_gets_register_tiles():
    """The interior piece's columns run over the same range at every k, so
    it gets register tiles; cut at the condition alone, each k had its own
    column range (no tiles)."""
    from tcdsl.driver import emit

    same5 = """
    def same5(float(B, C, T) x, float(O, C, 5) w, float(O) bias) -> (y) {
      y(b, o, t) +=! (t + k - 2 >= 0 && t + k - 2 < T ? x(b, c, t + k - 2) : 0) * w(o, c, k) where t in 0:T, k in 0:5
      y(b, o, t) = y(b, o, t) + bias(o)
    }"""
    k = tcdsl.compile(same5, options={"pad": False, "disk_cache": False})
    assert "acc = T.alloc_buffer" in emit(k, "tir")
    rng = np.random.default_rng(3)
    for B, C, T, O in [(2, 3, 1, 4), (1, 2, 4, 3), (3, 5, 70, 9)]:
        x, w, bias = (rng.standard_normal(s).astype(np.float32) for s in ((B, C, T), (O, C, 5), (O,)))
        ref = _conv_ref(x, w, 2, right=5) + bias[None, :, None]
        np.testing.assert_allclose(k(x, w, bias), ref, rtol=1e-4, atol=1e-4)
    model = driver.model_for(_compile(PADDED, "never", True).frontend, parse_options({}).schedule)
    interior = next(s for k in model.kernels() for s in k.stmts if s.name == "S0_0")
    # no select is left in the interior piece
    assert "?" not in str(interior.info.comp.rhs) and "Select" not in repr(interior.info.comp.rhs)


def _innermost_loops(stmt):
    from tvm import tirx

    out = []

    def visit(s):
        if isinstance(s, tirx.For) and not has_node(s.body, (tirx.For,)):
            out.append(s)
            return
        for f in ("body", "then_case", "else_case"):
            if getattr(s, f, None) is not None:
                visit(getattr(s, f))
        if hasattr(s, "seq"):
            for x in s.seq:
                visit(x)
    visit(stmt)
    return out


def _has_select(s) -> bool:
    import tvm
    from tvm import tirx

    def match(x):
        if isinstance(x, (tirx.Select, tirx.IfThenElse)):
            return True
        return isinstance(x, tvm.ir.expr.Call) and getattr(x.op, "name", "") == "prim.if_then_else"
    return has_node(s, match)


@pytest.mark.parametrize("src", [CAUSAL, PADDED, DILATED])
@pytest.mark.slow
def test_split_conv_has_no_select_in_its_innermost_loops(src):
    funcs = {}
    for split in (True, False):
        # (overlap_tail off: the overlapping last vector's store is a select of its own, not the program's)
        k = tcdsl.compile(src, options={"split_selects": split, "pad": False, "overlap_tail": False,
                                        "disk_cache": False})
        funcs[split] = k.backend().func
    inner = _innermost_loops(funcs[True].body)
    assert inner and not any(_has_select(lp) for lp in inner)
    assert any(_has_select(lp) for lp in _innermost_loops(funcs[False].body))  # the test sees selects


@pytest.mark.parametrize("dtype", ["float32", "int32"])
@pytest.mark.parametrize("mode", MODES)
def test_stencil(dtype, mode):
    src = f"""
    def stencil({dtype}(N) A) -> (y) {{
      y(i) = (i > 0 ? A(i - 1) : 0) + A(i) + (i < N - 1 ? A(i + 1) : 0) where i in 0:N
    }}"""
    k = _compile(src, mode)
    for N in (1, 2, 9):
        A = _rand(np.random.default_rng(3), N, dtype=np.dtype(dtype))
        ref = A.astype(np.float64).copy()
        ref[1:] += A[:-1]
        ref[:-1] += A[1:]
        np.testing.assert_allclose(k(A), ref, rtol=1e-5)
    if mode == "never":
        # i == 0 < N - 1, the middle, 0 < i == N - 1, and i == 0 == N - 1 (N == 1)
        assert len(_pieces(src)[0]) == 4


RNN = """
def rnn(float(T, B, I) x, float(B, I) h0) -> (h) {
  for t in T {
    h(t, b, i) = tanh((t == 0 ? h0(b, i) : h(t - 1, b, i)) + x(t, b, i))
  }
}
"""


@pytest.mark.parametrize("mode", MODES)
def test_boundary_select_on_a_loop_variable(mode):
    kernels = [_compile(RNN, mode)] + ([_compile(RNN, mode, split=False)] if mode == "never" else [])
    rng = np.random.default_rng(4)
    B, I = 3, 17
    for T in (1, 2, 5):
        x, h0 = _rand(rng, T, B, I), _rand(rng, B, I)
        ref, prev = np.zeros((T, B, I), np.float32), h0
        for t in range(T):
            prev = np.tanh(prev + x[t])
            ref[t] = prev
        for k in kernels:
            np.testing.assert_allclose(k(x, h0), ref, rtol=1e-5, atol=1e-6)
    if mode == "never":
        assert len(_pieces(RNN)[0]) == 2


@pytest.mark.parametrize("dtype", ["float32", "int32"])
@pytest.mark.parametrize("mode", MODES)
def test_reductions_with_a_select_inside_a_product(dtype, mode):
    # a lower-triangular sum (the other piece adds 0 * 2) and product (multiplies by 1)
    src = f"""
    def tri({dtype}(N, N) a) -> (s, p) {{
      s(i) +=! (j <= i ? a(i, j) : 0) * 2 where j in 0:N
      p(i) *=! (j <= i ? a(i, j) : 1) where j in 0:N
    }}"""
    N = 6
    a = _rand(np.random.default_rng(5), N, N, dtype=np.dtype(dtype))
    a[a == 0] = 1
    low = np.tril(a)
    s, p = _run(src, (a,), mode)
    np.testing.assert_allclose(s, 2 * low.sum(1).astype(np.float64), rtol=1e-5)
    np.testing.assert_allclose(p, np.where(np.tril(np.ones((N, N), bool)), a, 1).prod(1).astype(np.float64), rtol=1e-4)
    # one piece per statement: the pieces adding 0 and multiplying by 1 are left out (with
    # float32, the sum's `* 2` is a statement of its own after it: polyhedral/factor.py)
    names = [s for kern in _pieces(src) for s in kern]
    assert len(names) == len(set(names)) == (3 if dtype == "float32" else 2)


@pytest.mark.parametrize("mode", MODES)
def test_nested_selects_and_repeated_conditions(mode):
    src = """
    def f(float(N) A, float(N) B) -> (y) {
      y(i) = i < 2 ? A(i) : (i >= N - 2 ? B(i) : A(i) + (i < 2 ? 100 : B(i)))
    }"""
    k = _compile(src, mode)
    rng = np.random.default_rng(6)
    for N in (1, 3, 8):
        A, B = _rand(rng, N), _rand(rng, N)
        i = np.arange(N)
        ref = np.where(i < 2, A, np.where(i >= N - 2, B, A + B))
        np.testing.assert_allclose(k(A, B), ref, rtol=1e-6)


@pytest.mark.parametrize("mode", MODES)
def test_many_selects_are_capped(mode):
    # four conditions would cut the domain into nine pieces: at most four are made
    src = """
    def f(float(N, M) A) -> (y) {
      y(i, j) = (i > 0 ? A(i - 1, j) : 0) + (j > 0 ? A(i, j - 1) : 0)
              + (i < N - 1 ? A(i + 1, j) : 0) + (j < M - 1 ? A(i, j + 1) : 0) where i in 0:N, j in 0:M
    }"""
    N, M = 5, 7
    A = _rand(np.random.default_rng(7), N, M)
    P = np.pad(A, 1)
    ref = P[:-2, 1:-1] + P[2:, 1:-1] + P[1:-1, :-2] + P[1:-1, 2:]
    np.testing.assert_allclose(_run(src, (A,), mode), ref, rtol=1e-5, atol=1e-6)
    assert 2 <= len(_pieces(src)[0]) <= 4


def test_data_dependent_condition_is_not_split():
    src = """
    def relu(float(N) x) -> (y) {
      y(i) = x(i) > 0 ? x(i) : 0
    }"""
    assert _pieces(src) == [["S0"]]
    x = np.array([-1, 2, -3, 4], np.float32)
    np.testing.assert_array_equal(_run(src, (x,), "never"), np.maximum(x, 0))


def test_option_is_checked_and_in_the_tuning_space():
    with pytest.raises(tcdsl.TcError, match="split_selects"):
        tcdsl.compile(CAUSAL, options={"split_selects": 1})
    assert tcdsl.MappingOptions(split_selects=False).to_dict() == {"split_selects": False}
    from tcdsl.tune.space import _cpu_knobs

    assert any(k.name == "split_selects" for k in _cpu_knobs(True))


RNN2 = """
def rnn(float(T, B, H) x, float(B, H) h0, float(H, H) W, float(H, H) U) -> (h) {
  for t in T {
    h(t, b, j) +=! (t == 0 ? h0(b, k) : h(t - 1, b, k)) * U(k, j)
    h(t, b, j) = tanh(h(t, b, j) + (j > 0 ? x(t, b, j - 1) : 0) * W(0, j)) where j in 0:H
  }
}
"""


@pytest.mark.parametrize("mode", MODES)
def test_selects_in_a_reduction_and_a_statement_inside_a_loop(mode):
    # (without split_selects, the specialised kernels of this program fail in TVM's LLVM code generator)
    rng = np.random.default_rng(8)
    T, B, H = 4, 2, 5
    x, h0, W, U = _rand(rng, T, B, H), _rand(rng, B, H), _rand(rng, H, H), _rand(rng, H, H)
    ref, prev = np.zeros((T, B, H), np.float32), h0
    for t in range(T):
        shifted = np.concatenate([np.zeros((B, 1), np.float32), x[t, :, :-1]], axis=1)
        prev = np.tanh(prev @ U + shifted * W[0])
        ref[t] = prev
    np.testing.assert_allclose(_run(RNN2, (x, h0, W, U), mode), ref, rtol=1e-4, atol=1e-5)
    if mode == "never":
        assert _pieces(RNN2) == [["S0_0", "S0_1", "S1_0", "S1_1"]]


# -------- cut where a read of the written tensor meets the write (split._meets)
FLOYD = """
def fw(float(N,N) D0) -> (D) {
  D(i, j) = D0(i, j)
  for k in N {
    D(i, j) = fmin(D(i, j), D(i, k) + D(k, j))
  }
}
"""

# a rank-1 update through the pivot's row and column, which the step changes too
PIVOT = """
def pivot(double(N,N) A0) -> (A) {
  A(i, j) = A0(i, j)
  for k in N {
    A(i, j) = A(i, j) - 0.25 * A(i, k) * A(k, j)
  }
}
"""

# the second half reads the first, already reversed
MIRROR = """
def mirror(int32(N) x0) -> (x) {
  x(i) = x0(i)
  x(i) = x(N - 1 - i) * 3 + x(i)
}
"""


def _sequential(a, step):
    """The program's order: every element in turn, each read seeing the writes before it."""
    a = a.copy()
    for idx in np.ndindex(*a.shape):
        a[idx] = step(a, *idx)
    return a


def _floyd_ref(d):
    for kk in range(d.shape[0]):
        d = _sequential(d, lambda a, i, j: np.float32(min(a[i, j], np.float32(a[i, kk] + a[kk, j]))))
    return d


def _pivot_ref(a):
    for kk in range(a.shape[0]):
        a = _sequential(a, lambda m, i, j: m[i, j] - 0.25 * m[i, kk] * m[kk, j])
    return a


@pytest.mark.parametrize("mode", MODES)
def test_floyd_warshall_in_the_program_order(mode):
    """Negative distances make the order visible: row and column k change
    during step k, and each element reads them before or after as the
    sequential order says.  Exact in float32."""
    k = _compile(FLOYD, mode)
    for n in (1, 2, 3, 8, 17):
        d0 = np.random.default_rng(n).standard_normal((n, n)).astype(np.float32)
        np.testing.assert_array_equal(k(d0), _floyd_ref(d0), err_msg=f"N={n}")


@pytest.mark.parametrize("mode", MODES)
def test_an_update_through_the_changing_pivot(mode):
    k = _compile(PIVOT, mode)
    for n in (1, 4, 9):
        a0 = np.random.default_rng(n).uniform(-1, 1, (n, n))
        np.testing.assert_allclose(k(a0), _pivot_ref(a0), rtol=1e-12, atol=1e-12, err_msg=f"N={n}")


@pytest.mark.parametrize("mode", MODES)
def test_a_read_mirrored_through_the_written_tensor(mode):
    k = _compile(MIRROR, mode)
    for n in (1, 2, 5, 8):
        x0 = np.arange(1, n + 1, dtype=np.int32)
        want = _sequential(x0, lambda a, i: a[n - 1 - i] * 3 + a[i])
        np.testing.assert_array_equal(k(x0), want, err_msg=f"N={n}")


def test_floyd_warshall_pieces_run_in_parallel_and_in_vectors():
    """Cut at j == k and i == k, the step is 9 pieces, each without a
    dependence of its own: the 2-D pieces get a parallel loop and a
    vectorized inner loop (one serial wavefront before)."""
    assert len(_pieces(FLOYD)[1]) == 9
    assert _pieces(FLOYD, split=False)[1] == ["S1"]
    ast = driver.emit(_compile(FLOYD), "isl-ast")
    step = ast[ast.index("S0("):]
    assert step.count("// par\n") == 4 * 2 + 4, step  # 4 2-D pieces, 4 1-D pieces, the point (k, k)
    script = _compile(FLOYD).script
    assert "T.parallel(" in script[script.index("for k in"):] and "T.vectorized(" in script[script.index("for k in"):]


def test_no_cut_where_the_read_is_a_constant_step_away():
    """``c(t - 1, j)`` never meets ``c(t, j)``: nothing to cut, as before."""
    src = """def scan(float(T,N) x) -> (c) {
      c(t, j) = x(t, j)
      for s in T { c(t, j) = t >= 1 && t == s ? c(t - 1, j) + x(t, j) : c(t, j) }
    }"""
    assert all(len(names) <= 4 for names in _pieces(src))


PADDED_WITH_A_VALUE = [
    ("""def f(float(C,L) x, float(O,C,3) w) -> (y) {
      y(o, t) +=! (t + k - 1 >= 0 && t + k - 1 < L ? x(c, t + k - 1) : 1.0) * w(o, c, k) where t in 0:L, k in 0:3
    }""", [(2, 3), (1, 2, 3)]),
    ("""def f(float(C,L) x, float(C,3) w, float(C,3) z) -> (y) {
      y(o, t) +=! (t + k - 1 >= 0 && t + k - 1 < L ? x(c, t + k - 1) : z(c, k)) * w(c, k)
          where t in 0:L, k in 0:3, o in 0:2
    }""", [(5, 37), (5, 3), (5, 3)]),
    ("""def f(float(C,H,W) x, float(O,C,3,3) w) -> (y) {
      y(o, h, v) +=! (h + i - 1 >= 0 && h + i - 1 < H && v + j - 1 >= 0 && v + j - 1 < W ?
                      x(c, h + i - 1, v + j - 1) : 0.5) * w(o, c, i, j) where h in 0:H, v in 0:W, i in 0:3, j in 0:3
    }""", [(3, 9, 21), (6, 3, 3, 3)]),
    # a max pool padded with a value above the data: its pieces are kept
    ("""def mp(float(N,C,H,W) x) -> (y) {
      y(n, c, i, j) max=! (2 * i + ki - 1 >= 0 && 2 * i + ki - 1 < H && 2 * j + kj - 1 >= 0 && 2 * j + kj - 1 < W ?
                           x(n, c, 2 * i + ki - 1, 2 * j + kj - 1) : 0.0) where i in 0:H/2, j in 0:W/2, ki in 0:3, kj in 0:3
    }""", [(1, 2, 33, 40)]),
]


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("which", range(len(PADDED_WITH_A_VALUE)))
@pytest.mark.parametrize("mode", ["never", "after-scheduling"])
def test_a_sum_padded_with_a_nonzero_value_keeps_every_term(which, mode):
    # the padding's pieces (``1.0 * w(o, c, k)`` at both ends of ``t``) are
    # terms of the sum: none may be lost
    from tcdsl.testing import evaluate
    src, shapes = PADDED_WITH_A_VALUE[which]
    rng = np.random.default_rng(9)
    args = [rng.standard_normal(s).astype(np.float32) - 1.0 for s in shapes]
    k = tcdsl.compile(src, specialize=mode, options={"disk_cache": False})
    np.testing.assert_allclose(k(*args), evaluate(src, args), rtol=1e-4, atol=1e-4)


# Gaussian elimination in place, the rest of the matrix kept by a select on
# the written element itself: those pieces change nothing and are left out
LU = """
def lu(double(B,N,N) A0) -> (A) {
  A(b, i, j) = A0(b, i, j)
  for k in N {
    A(b, i, j) = i > k && j > k ? A(b, i, j) - A(b, i, k) * A(b, k, j) / A(b, k, k) : A(b, i, j)
    A(b, i, k) = i > k ? A(b, i, k) / A(b, k, k) : A(b, i, k)
  }
}
"""


def _lu_ref(a):
    a = a.copy()
    for k in range(a.shape[-1]):
        a[:, k + 1:, k + 1:] -= a[:, k + 1:, k:k + 1] * a[:, k:k + 1, k + 1:] / a[:, k:k + 1, k:k + 1]
        a[:, k + 1:, k] /= a[:, k:k + 1, k]
    return a


@pytest.mark.parametrize("mode", MODES)
def test_lu_in_place_against_numpy(mode):
    k = _compile(LU, mode)
    for b, n in ((1, 1), (2, 2), (3, 5), (2, 17)):
        a0 = np.random.default_rng(n).standard_normal((b, n, n))
        a0[:, range(n), range(n)] += n + 1.0  # (no pivoting needed)
        np.testing.assert_allclose(k(a0), _lu_ref(a0), rtol=1e-12, atol=1e-12, err_msg=f"B={b}, N={n}")


def test_pieces_that_assign_the_element_itself_are_left_out():
    """Each statement of the step keeps one piece, the one that changes
    something; its rows then run in vectors (the update's columns were the
    inner loop, in scalars, behind the copies)."""
    assert _pieces(LU)[1] == ["S1", "S2"]
    assert _pieces(LU, split=False)[1] == ["S1", "S2"]  # (the select is kept whole)
    script = _compile(LU).script
    step = script[script.index("for k"):]
    assert "T.vectorized(" in step
    stores = [ln.strip() for ln in step.splitlines() if " = A[" in ln]
    assert stores and all("- A[" in s or "/ A[" in s or "rcp" in s for s in stores), stores


# bilinear 2x upsample (align_corners=False): the neighbour is picked by the
# parity of the output's index
UPSAMPLE = """
def up(double(H,W) x) -> (out) {
  r(y, w) = 0.75 * x(y / 2, w)
     + 0.25 * (y % 2 == 0 ? (y / 2 >= 1 ? x(y / 2 - 1, w) : x(y / 2, w))
                          : (y / 2 + 1 < H ? x(y / 2 + 1, w) : x(y / 2, w))) where y in 0:2 * H
  out(y, v) = 0.75 * r(y, v / 2)
     + 0.25 * (v % 2 == 0 ? (v / 2 >= 1 ? r(y, v / 2 - 1) : r(y, v / 2))
                          : (v / 2 + 1 < W ? r(y, v / 2 + 1) : r(y, v / 2))) where v in 0:2 * W
}
"""


def _upsample_ref(x):
    for axis in (0, 1):
        n = x.shape[axis]
        src = np.maximum((np.arange(2 * n) + 0.5) / 2 - 0.5, 0)
        i0 = np.floor(src).astype(int)
        i1 = np.minimum(i0 + 1, n - 1)
        f = src - i0
        a, b = np.take(x, i0, axis), np.take(x, i1, axis)
        shape = [1, 1]
        shape[axis] = 2 * n
        x = a * (1 - f).reshape(shape) + b * f.reshape(shape)
    return x


@pytest.mark.parametrize("mode", MODES)
def test_bilinear_upsample_against_numpy(mode):
    k = _compile(UPSAMPLE, mode)
    for h, w in ((1, 1), (1, 5), (2, 3), (7, 40)):
        x = np.random.default_rng(h * w).standard_normal((h, w))
        np.testing.assert_allclose(k(x), _upsample_ref(x), rtol=1e-12, atol=1e-12, err_msg=f"H={h}, W={w}")


def test_a_parity_of_the_last_output_variable_stays_a_select():
    """Split at ``v % 2 == 0``, each piece would step ``v`` by 2 and store
    every other element in scalars; kept, the inner loop runs in vectors
    over every element.  A parity of an outer variable still splits."""
    src = """def f(double(H,W) x) -> (a, b) {
      a(y, w) = y % 2 == 0 ? x(y / 2, w) : -x(y / 2, w) where y in 0:2 * H
      b(h, v) = v % 2 == 0 ? x(h, v / 2) : -x(h, v / 2) where v in 0:2 * W
    }"""
    names = _pieces(src)[0]
    assert sorted(names) == ["S0_0", "S0_1", "S1"], names
    x = np.arange(6.0).reshape(2, 3)
    a, b = _compile(src)(x)
    np.testing.assert_array_equal(a, np.repeat(x, 2, 0) * np.array([1, -1, 1, -1])[:, None])
    np.testing.assert_array_equal(b, np.repeat(x, 2, 1) * np.array([1, -1] * 3))
    script = _compile(UPSAMPLE).script
    out = [ln for ln in script.splitlines() if ln.strip().startswith("out[")]
    assert any("_v]" in ln or "_v " in ln for ln in out), "no vector loop stores out"


# a causal mask and a padding mask from lengths: the affine part splits
MASKED = """
def masked(float(B, L, L) s, int32(B) len) -> (m, e) {
  m(b, i) max=! j <= i && j >= L - len(b) ? s(b, i, j) : -1e30
  e(b, i, j) = j <= i && j >= L - len(b) ? exp(s(b, i, j) - m(b, i)) : 0
}
"""

# either side of an || decides; a guarded read on the right of && (x(i - 1) at i = 0)
EITHER = """
def either(float(N) x, int32(N) keep) -> (y, z) {
  y(i) = i == 0 || keep(i) > 0 ? x(i) : -x(i)
  z(i) = i >= 1 && x(i - 1) > 0 ? x(i - 1) : 2 * x(i) where i in 0:N
}
"""


def _masked_ref(s, lens):
    B, L, _ = s.shape
    i, j = np.arange(L)[:, None], np.arange(L)[None, :]
    ok = (j <= i)[None] & (j[None] >= (L - lens)[:, None, None])
    m = np.where(ok, s.astype(np.float64), -1e30).max(2)
    return m, np.where(ok, np.exp(np.where(ok, s - m[:, :, None], 0)), 0)


@pytest.mark.parametrize("mode", MODES)
def test_the_affine_operand_of_a_mask_splits(mode):
    # j <= i and the rest, for both (without the split: one statement each)
    assert _pieces(MASKED) == [["S0_0", "S0_1", "S1_0", "S1_1"]]
    assert _pieces(MASKED, split=False) == [["S0", "S1"]]
    rng = np.random.default_rng(11)
    for B, L in [(3, 9), (1, 1), (2, 17)]:
        s = _rand(rng, B, L, L)
        lens = rng.integers(0, L + 1, B).astype(np.int32)
        m, e = _run(MASKED, (s, lens), mode)
        want_m, want_e = _masked_ref(s, lens)
        np.testing.assert_allclose(m, want_m, rtol=1e-6)
        np.testing.assert_allclose(e, want_e, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", MODES)
def test_either_side_of_an_or_and_a_read_guarded_on_the_right_of_an_and(mode):
    assert [sorted(p) for p in _pieces(EITHER)] == [["S0_0", "S0_1", "S1_0", "S1_1"]]
    rng = np.random.default_rng(12)
    for N in (1, 2, 19):
        x = _rand(rng, N)
        keep = rng.integers(0, 2, N).astype(np.int32)
        y, z = _run(EITHER, (x, keep), mode)
        idx = np.arange(N)
        np.testing.assert_array_equal(y, np.where((idx == 0) | (keep > 0), x, -x))
        prev = np.concatenate([[0], x[:-1]]).astype(np.float32)
        np.testing.assert_array_equal(z, np.where((idx >= 1) & (prev > 0), prev, 2 * x))


# a data test on the left of the bounds of a padded window (a morphological dilation by a mask)
DILATE = """
def dilate(float(N,H,W) img, float(K,K) se) -> (d) {
  d(n, h, w) max=! (se(i, j) > 0 && y >= 0 && y < H && x >= 0 && x < W ? img(n, y, x) : -inf)
    where h in 0:H, w in 0:W, i in 0:K, j in 0:K, y = h + i - K / 2, x = w + j - K / 2
}
"""


def _dilate_ref(img, se):
    N, H, W = img.shape
    K = se.shape[0]
    out = np.full(img.shape, -np.inf, np.float32)
    pad = np.pad(img, ((0, 0), (K // 2, K), (K // 2, K)), constant_values=-np.inf)
    for i, j in zip(*np.nonzero(se > 0)):
        out = np.maximum(out, pad[:, i:i + H, j:j + W])
    return out


@pytest.mark.parametrize("mode", MODES)
def test_a_data_test_left_of_affine_bounds_is_decided_by_them(mode):
    """Where ``y < 0`` the condition ``se(i, j) > 0 && y >= 0 && ...`` fails
    whatever ``se`` holds (``se(i, j)`` reads at affine indices, so not
    evaluating it is safe): that piece is -inf, the identity of ``max``, and
    is left out, as are those of the other three bounds (pieces left out do
    not count against MAX_PIECES).  One statement remains, its select on
    ``se`` alone; kept whole, the conjunction split into pieces of 6,400
    lines of TIR that took minutes to compile."""
    assert _pieces(DILATE) == [["S0"]]
    k = _compile(DILATE, "after-scheduling")
    model = driver.model_for(k.frontend, parse_options({}).schedule)
    (s,) = [s for kern in model.kernels() for s in kern.stmts if not s.is_init]
    from tcdsl.syntax import nodes as n
    conds = [x.cond for x in n.walk(s.info.comp.rhs) if isinstance(x, n.Select)]
    assert len(conds) == 1 and not any(isinstance(x, n.Binary) and x.op == "&&" for x in n.walk(conds[0]))
    rng = np.random.default_rng(13)
    kern = _compile(DILATE, mode)
    for N, H, W, K in [(2, 9, 11, 5), (1, 3, 4, 5), (1, 1, 1, 3), (2, 6, 5, 4)]:
        img = _rand(rng, N, H, W)
        se = (rng.random((K, K)) > 0.4).astype(np.float32)
        np.testing.assert_array_equal(kern(img, se), _dilate_ref(img, se))


def test_a_data_test_at_run_time_indices_stays_in_the_condition():
    """``keep(idx(i) + j) > 0 && j < J`` where ``j >= J``: the left operand
    reads at a run-time index, so that piece keeps the whole condition
    (checked mode reports an index out of range there)."""
    src = """
    def f(float(N) x, int32(N) idx, float(N) keep) -> (y) {
      y(i) +=! (keep(idx(i) + j) > 0 && j < J ? x(j) : 0.0) where i in 0:N, j in 0:N, J = N - 2
    }"""
    from tcdsl.syntax import nodes as n
    k = _compile(src, "after-scheduling")
    model = driver.model_for(k.frontend, parse_options({}).schedule)
    rhs = {s.name: s.info.comp.rhs for kern in model.kernels() for s in kern.stmts if not s.is_init}
    assert len(rhs) == 2
    assert sorted(any(isinstance(x, n.Binary) and x.op == "&&" for x in n.walk(r)) for r in rhs.values()) \
        == [False, True]
    x = np.arange(1, 7, dtype=np.float32)
    idx = np.array([0, 1, 2, 0, 1, 0], np.int32)
    keep = np.array([1, 0, 1, 1, 0, 1], np.float32)
    want = np.array([sum(x[j] for j in range(4) if keep[idx[i] + j] > 0) for i in range(6)], np.float32)
    np.testing.assert_array_equal(_compile(src, "never")(x, idx, keep), want)
