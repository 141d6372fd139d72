"""Programs whose shape defeated the default mapping: a reduction over a
triangle or a band (a select ``k <= i ? a(i, k) : 0`` split by
polyhedral/split.py gives the reduction loop a range that moves with the
row), a bilinear form (a weight read across its rows under two reduction
loops), and a matrix-vector product inside a sequential loop (a norm fused
into its row loop).  Structure on the
TIR, values against NumPy in float64, guard pages around every tensor."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tcdsl
from helpers import grouped_conv1d

NO_CACHE = {"disk_cache": False}

TRIANGLES = {
    "lower": ("c(i, j) +=! (k <= i ? a(i, k) : 0) * b(k, j)", lambda a: np.tril(a)),
    "strictly lower": ("c(i, j) +=! (k < i ? a(i, k) : 0) * b(k, j)", lambda a: np.tril(a, -1)),
    "upper": ("c(i, j) +=! (k >= i ? a(i, k) : 0) * b(k, j)", lambda a: np.triu(a)),
    "band": ("c(i, j) +=! (k >= i - 2 && k <= i + 3 ? a(i, k) : 0) * b(k, j)", lambda a: np.triu(np.tril(a, 3), -2)),
}


def _tri_src(stmt: str) -> str:
    return f"def f(float(N,N) a, float(N,M) b) -> (c) {{\n  {stmt}\n}}\n"


# the tile shapes and vector widths these tests read in the TIR are an
# AVX-512 host's defaults (conftest.py ``avx512_tiles``)
pytestmark = pytest.mark.usefixtures("avx512_tiles")


def _rand(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("name", list(TRIANGLES))
def test_a_reduction_over_a_triangle_or_band_runs_in_register_tiles(name):
    stmt, mask = TRIANGLES[name]
    k = tcdsl.compile(_tri_src(stmt), options=NO_CACHE)
    # the tile's rows share one reduction loop: no select is left in it
    assert "acc = T.alloc_buffer((4, 64))" in k.script
    updates = [ln for ln in k.script.splitlines() if re.search(r"acc\[\w+, u \* 16 \+ v\] = acc", ln)]
    assert updates and not any("Select" in ln or "if_then_else" in ln for ln in updates)
    # each row's range of the tile is computed once into a local array, which
    # TVM's passes do not see through (a band's nested min/max written out
    # made them take half a minute)
    assert re.search(r"c\d_range = T.alloc_local\(\(10,\)", k.script), k.script
    rng = np.random.default_rng(0)
    for N, M in [(1, 1), (3, 17), (4, 64), (5, 65), (9, 100), (13, 16), (37, 129)]:
        a, b = _rand(rng, N, N), _rand(rng, N, M)
        np.testing.assert_allclose(k(a, b), mask(a.astype(np.float64)) @ b, rtol=1e-4, atol=1e-4)


def test_ragged_tiles_sum_each_row_in_order():
    """The steps below the shared range, the shared range and those above it
    run in increasing ``k``: the results equal a plain row-by-row loop's."""
    src = _tri_src(TRIANGLES["band"][0])
    k = tcdsl.compile(src, options=NO_CACHE)
    plain = tcdsl.compile(src, options={**NO_CACHE, "register_tiles": False})
    rng = np.random.default_rng(1)
    a, b = _rand(rng, 23, 23), _rand(rng, 23, 70)
    np.testing.assert_array_equal(k(a, b), plain(a, b))


def test_ragged_tiles_stay_inside_their_tensors():
    import guard  # tests/guard.py: guard pages before and after every tensor

    cases = [{"id": f"ragged:{i}", "source": _tri_src(TRIANGLES[name][0]), "sizes": sizes, "seed": i}
             for i, (name, sizes) in enumerate([("lower", {"N": 5, "M": 65}), ("upper", {"N": 9, "M": 17}),
                                                ("band", {"N": 13, "M": 64}), ("strictly lower", {"N": 1, "M": 3})])]
    guard.assert_all_work(cases)


BILINEAR = """
def bil(float(B,I) x1, float(B,J) x2, float(O,I,J) W, float(O) bias) -> (y) {
  y(b, o) +=! x1(b, i) * W(o, i, j) * x2(b, j)
  y(b, o) = y(b, o) + bias(o)
}
"""


def test_a_bilinear_form_packs_its_weight_across_both_reductions():
    k = tcdsl.compile(BILINEAR, options=NO_CACHE)
    # W(o, i, j) copied to a panel contiguous along o, read by 4 x 64 tiles
    assert "W_panel" in k.script and "acc = T.alloc_buffer((4, 64))" in k.script
    rng = np.random.default_rng(2)
    for B, I, J, O in [(1, 1, 1, 1), (3, 5, 7, 9), (9, 4, 6, 70), (16, 8, 8, 128)]:
        x1, x2, W, bias = _rand(rng, B, I), _rand(rng, B, J), _rand(rng, O, I, J), _rand(rng, O)
        want = np.einsum("bi,oij,bj->bo", x1.astype(np.float64), W, x2) + bias
        np.testing.assert_allclose(k(x1, x2, W, bias), want, rtol=1e-4, atol=1e-4)


POWER = """
def power(float(N,N) A, float(N) v0) -> (v) {
  for t in T {
    if t == 0 { w(i) +=! A(i, j) * v0(j) } else { w(i) +=! A(i, j) * v(t - 1, j) }
    nn +=! w(i) * w(i)
    v(t, i) = w(i) / sqrt(nn)
  }
}
"""


def test_a_matrix_vector_product_in_a_loop_keeps_its_rows_parallel():
    k = tcdsl.compile(POWER, options=NO_CACHE)
    # isl fuses the norm's reduction into the rows' loop, which makes it
    # serial; the schedule of one nest per component keeps the rows
    # parallel, a vector loop over them reading the transposed copy
    loop = k.script[k.script.index("for t in range"):]
    assert re.search(r"T\.parallel\(.*\n(.*\n){0,12}.*A_t\[", loop), loop
    rng = np.random.default_rng(3)
    for N, T in [(1, 1), (5, 3), (70, 4), (129, 6)]:
        A, v0 = _rand(rng, N, N), _rand(rng, N)
        v, want = v0.astype(np.float64), []
        for _ in range(T):
            w = A.astype(np.float64) @ v
            v = w / np.sqrt(w @ w)
            want.append(v)
        np.testing.assert_allclose(k(A, v0, T=T), np.array(want), rtol=1e-4, atol=1e-4)


SELF_PRODUCTS = {
    # X read at the row (i) and at the column (j): the column's read from a panel
    "gram": ("def f(float(N,D) X) -> (G) {\n  G(i, j) +=! X(n, i) * X(n, j)\n}\n",
             lambda X: X.T @ X, [(1, 1), (3, 5), (130, 17), (257, 64), (64, 130)]),
    "gram of rows": ("def f(float(D,N) X) -> (G) {\n  G(i, j) +=! X(i, n) * X(j, n)\n}\n",
                     lambda X: X @ X.T, [(1, 1), (5, 3), (17, 130), (64, 257)]),
    "centered": ("def f(float(N,D) X, float(D) m) -> (C) {\n"
                 "  C(i, j) +=! (X(n, i) - m(i)) * (X(n, j) - m(j))\n}\n", None, [(2, 3), (129, 70)]),
}


@pytest.mark.parametrize("name", list(SELF_PRODUCTS))
def test_a_tensor_read_at_the_row_and_at_the_column_packs_the_columns_read(name):
    src, ref, shapes = SELF_PRODUCTS[name]
    k = tcdsl.compile(src, options=NO_CACHE)
    plain = tcdsl.compile(src, options={**NO_CACHE, "register_tiles": False})
    # the column's read comes from the panel, the row's from X itself (the
    # centered factors are one table, polyhedral/tables.py, laid out as X:
    # the product reads it at the row and at the column)
    x = col = "C_tab" if name == "centered" else "X"
    assert f"{col}_panel" in k.script and f"{col}_packed[" in k.script, k.script
    assert re.search(x + r"\[[^\]]*c0_b \* 4 \+ r", k.script), k.script
    rng = np.random.default_rng(4)
    for shape in shapes:
        X = _rand(rng, *shape)
        if ref is None:
            m = _rand(rng, shape[1])
            want = (X - m).T.astype(np.float64) @ (X - m)
            np.testing.assert_allclose(k(X, m), want, rtol=1e-4, atol=1e-3)
            np.testing.assert_array_equal(k(X, m), plain(X, m))
        else:
            np.testing.assert_allclose(k(X), ref(X.astype(np.float64)), rtol=1e-4, atol=1e-3)
            # (a chunk's rows after its last full tile read the columns as dot products in lanes,
            # codegen/cpu_dot.py: another order of the sum)
            np.testing.assert_allclose(k(X), plain(X), rtol=1e-5, atol=1e-5)


def test_self_products_stay_inside_their_tensors():
    import guard

    cases = [{"id": f"self:{name}:{i}", "source": SELF_PRODUCTS[name][0], "sizes": sizes, "seed": i}
             for i, (name, sizes) in enumerate([("gram", {"N": 130, "D": 17}), ("gram of rows", {"D": 65, "N": 3}),
                                                ("centered", {"N": 5, "D": 66})])]
    guard.assert_all_work(cases)


ELMAN1 = """
def elman1(float(T,I) x, float(H) h0, float(H,I) Wih, float(H,H) Whh) -> (h) {
  for t in T {
    if t == 0 { a(j) +=! Whh(j, k) * h0(k) } else { a(j) +=! Whh(j, k) * h(t - 1, k) }
    p(j) +=! Wih(j, i) * x(t, i)
    h(t, j) = tanh(a(j) + p(j))
  }
}
"""


def test_a_strip_of_a_matrix_vector_product_sums_in_registers():
    k = tcdsl.compile(ELMAN1, options=NO_CACHE)
    plain = tcdsl.compile(ELMAN1, options={**NO_CACHE, "register_tiles": False})
    # each step's product runs in parallel strips of 128 columns; a strip's
    # columns are accumulated in registers over the whole k loop
    step = k.script[k.script.index("for t in range"):]
    assert re.search(r"T\.parallel\(.*\n(.*\n){0,12}.*acc = T\.alloc_buffer\(\(1, 128\)\)", step), step
    assert "acc = T.alloc_buffer" not in plain.script[plain.script.index("for t in range"):]
    rng = np.random.default_rng(5)
    for T, I, H in [(1, 1, 1), (3, 2, 5), (4, 3, 17), (3, 5, 128), (2, 4, 130), (3, 2, 300)]:
        x, h0 = _rand(rng, T, I), _rand(rng, H)
        Wih, Whh = _rand(rng, H, I) / np.float32(np.sqrt(I)), _rand(rng, H, H) / np.float32(np.sqrt(H))
        h, want = h0.astype(np.float64), []
        for t in range(T):
            h = np.tanh(Whh.astype(np.float64) @ h + Wih @ x[t].astype(np.float64))
            want.append(h)
        got = k(x, h0, Wih, Whh)
        np.testing.assert_allclose(got, np.array(want), rtol=1e-4, atol=1e-4)
        np.testing.assert_array_equal(got, plain(x, h0, Wih, Whh))


TRSV = """
def trsv(float(N,N) L, float(N,B) b) -> (x) {
  for i in N {
    s(c) +=! (j < i ? L(i, j) * x(j, c) : 0) where j in 0:N, c in 0:B
    x(i, c) = (b(i, c) - s(c)) / L(i, i)
  }
}
"""


def test_a_triangular_solve_written_as_a_loop():
    k = tcdsl.compile(TRSV, options=NO_CACHE)
    # each step's strips of 128 columns: in parallel when there are two or
    # more, else on the calling thread (no parallel region per step for one strip)
    step = k.script[k.script.index("for i in range"):]
    assert re.search(r"if \(T\.max\(B, 0\) \+ 128 - 1\) // 128 >= 2:\n\s*for c0 in T\.parallel", step), step
    assert re.search(r"else:\n\s*for c0 in range\(\(T\.max\(B, 0\) \+ 128 - 1\) // 128\)", step), step
    rng = np.random.default_rng(6)
    for N, B in [(1, 1), (4, 3), (33, 16), (70, 130)]:
        L = np.tril(_rand(rng, N, N)) * 0.1 + 2 * np.eye(N, dtype=np.float32)
        b = _rand(rng, N, B)
        want = np.linalg.solve(L.astype(np.float64), b.astype(np.float64))
        np.testing.assert_allclose(k(L, b), want, rtol=1e-4, atol=1e-4)


def test_strips_stay_inside_their_tensors():
    import guard

    cases = [{"id": f"strip:{i}", "source": src, "sizes": sizes, "seed": i}
             for i, (src, sizes) in enumerate([(ELMAN1, {"T": 2, "I": 3, "H": 130}), (ELMAN1, {"T": 3, "I": 1, "H": 17}),
                                               (TRSV, {"N": 9, "B": 131})])]
    guard.assert_all_work(cases)


GROUPED = """def gconv(float(B,C,L) x, float(O,CG,K) w) -> (y) {
  y(b, o, t) +=! x(b, (o / 4) * CG + c, t + k) * w(o, c, k) where t in 0:L - K + 1
}"""


def test_a_grouped_convolution_runs_in_register_tiles():
    """``x(b, (o / 4) * CG + c, t + k)``: a division by a power of two is a
    shift; by 3 it is C's truncating division with a correction
    (codegen/expr.py ``floordiv``; TVM's floor division would be a Let
    binding, which unrolled register tiles may not copy): both run in
    register tiles."""
    k = tcdsl.compile(GROUPED, options=NO_CACHE)
    assert "acc = T.alloc_buffer((4," in k.script
    other = tcdsl.compile(GROUPED.replace("o / 4", "o / 3"), options=NO_CACHE)
    assert "acc = T.alloc_buffer((4," in other.script
    rng = np.random.default_rng(11)
    for B, G, CG, L, K in [(1, 1, 1, 3, 3), (2, 2, 3, 20, 3), (3, 3, 5, 70, 2), (2, 4, 8, 37, 5)]:
        x, w = _rand(rng, B, G * CG, L), _rand(rng, 4 * G, CG, K)
        np.testing.assert_allclose(k(x, w), grouped_conv1d(x.astype(np.float64), w, G), rtol=1e-4, atol=1e-4)
    x, w = _rand(rng, 2, 9, 11), _rand(rng, 9, 3, 3)
    np.testing.assert_allclose(other(x, w), grouped_conv1d(x.astype(np.float64), w, 3), rtol=1e-4, atol=1e-4)


def test_grouped_tiles_stay_inside_their_tensors():
    import guard

    cases = [{"id": f"grouped:{i}", "source": GROUPED, "sizes": sizes, "seed": i}
             for i, sizes in enumerate([{"B": 2, "C": 6, "L": 21, "O": 8, "CG": 3, "K": 3},
                                        {"B": 1, "C": 16, "L": 70, "O": 16, "CG": 4, "K": 2}])]
    guard.assert_all_work(cases)
