"""Products and quotients of sizes in where ranges, loop bounds and output
types (sema/sizes.py ``derive_sizes``): each becomes a derived size that a
call computes from the others (runtime/args.py ``bind_sizes``), checked
against NumPy in every specialize mode, under guard pages, in the interpreter
and after a round trip through the disk cache's signature."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import tcdsl
from tcdsl.errors import TcWarning
from tcdsl.runtime.signature import Signature
from tcdsl.testing import evaluate

sys.path.insert(0, str(Path(__file__).resolve().parent))
import guard  # noqa: E402

GRID = """
def outer(float(N, G) x) -> (y) {
  y(n, c) = x(n, c / G) * x(n, c % G) where c in 0:G * G
}
"""

FLAT = """
def flat(float(N, K, V) x) -> (float(N, K * V) y, s) {
  y(n, f) = x(n, f / V, f % V) where f in 0:K * V
  for t in 0:K * V { s(t, n) = y(n, t) * 2 }
}
"""

POOL = """
def pool(float(B, N) x) -> (y) {
  y(b, i) +=! x(b, i * S + k) where i in 0:N / S, k in 0:S
}
"""


def _outer(x):
    return (x[:, :, None] * x[:, None, :]).reshape(x.shape[0], -1)


@pytest.mark.parametrize("mode", ["never", "before-scheduling", "after-scheduling"])
def test_a_grid_of_g_by_g_cells_in_every_mode(mode):
    k = tcdsl.compile(GRID, specialize=mode, options={"disk_cache": False})
    rng = np.random.default_rng(0)
    for n, g in [(3, 5), (2, 1), (4, 17)]:
        x = rng.standard_normal((n, g)).astype(np.float32)
        np.testing.assert_allclose(k(x), _outer(x), rtol=1e-6)
    assert k(np.zeros((2, 0), np.float32)).shape == (2, 0)


def test_the_interpreter_derives_the_same_size():
    x = np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)
    np.testing.assert_allclose(evaluate(GRID, [x]), _outer(x), rtol=1e-6)


def test_an_output_type_and_a_loop_bound_over_a_product():
    k = tcdsl.compile(FLAT, options={"disk_cache": False})
    x = np.random.default_rng(2).standard_normal((2, 3, 4)).astype(np.float32)
    y, s = k(x)
    np.testing.assert_array_equal(y, x.reshape(2, 12))
    np.testing.assert_array_equal(s, 2 * x.reshape(2, 12).T)
    assert "y: [N, (K * V)]" in tcdsl.driver.emit(k, "ranges")


def test_a_derived_size_is_not_given_at_a_call_and_follows_fixed_sizes():
    k = tcdsl.compile(FLAT, sizes={"K": 3}, options={"disk_cache": False})
    x = np.ones((2, 3, 5), np.float32)
    assert k(x)[0].shape == (2, 15)
    assert k(x, K_x_V=15)[0].shape == (2, 15)  # (the value it has: accepted)
    with pytest.raises(tcdsl.TcShapeError, match=r"size 'K_x_V' is K \* V = 15 here, but 14 given at the call"):
        k(x, K_x_V=14)
    with pytest.raises(tcdsl.TcShapeError, match="'x' dim 1"):
        k(np.ones((2, 4, 5), np.float32))


def test_a_quotient_by_a_free_size_and_its_zero_divisor():
    k = tcdsl.compile(POOL, options={"disk_cache": False})
    x = np.arange(14, dtype=np.float32).reshape(2, 7)
    np.testing.assert_array_equal(k(x, S=3), x[:, :6].reshape(2, 2, 3).sum(-1))
    np.testing.assert_array_equal(k(x, S=7), x.sum(-1, keepdims=True))
    with pytest.raises(tcdsl.TcShapeError, match="size 'N_div_S' = N / S divides by zero"):
        k(x, S=0)


def test_the_signature_keeps_the_derived_sizes_through_json():
    k = tcdsl.compile(GRID, options={"disk_cache": False})
    sig = k.signature if hasattr(k, "signature") else None
    if sig is None:
        from tcdsl.codegen.signature import signature
        sig = signature(k.frontend.checked, k.frontend.ranges, "llvm")
    assert sig.derived == (("G_x_G", "G * G", "(s['G'] * s['G'])"),)
    assert Signature.from_json(sig.to_json()) == sig


def test_a_name_the_program_uses_is_not_taken():
    src = GRID.replace("x) -> (y)", "x, float(G_x_G) w) -> (y)").replace("x(n, c % G)", "x(n, c % G) * w(0)")
    k = tcdsl.compile(src, options={"disk_cache": False})
    x, w = np.float32([[1, 2]]), np.float32([3, 0, 0, 0, 0])
    np.testing.assert_array_equal(k(x, w), 3 * _outer(x))


def test_the_gradient_program_derives_it_again():
    text = tcdsl.gradient(POOL)
    assert "(N / S)" in text


def test_under_guard_pages():
    cases = [{"id": "grid", "source": GRID, "entry": None, "sizes": {"N": 3, "G": 4}},
             {"id": "flat", "source": FLAT, "entry": None, "sizes": {"N": 2, "K": 3, "V": 5}}]
    records = guard.run_cases(cases)
    assert not guard.failures(records), records
    assert {r["outcome"] for r in records} == {"works"}, records


def test_a_read_past_its_tensor_is_refused_at_the_call():
    with pytest.warns(TcWarning, match="may be read out of bounds"):
        k = tcdsl.compile("def f(float(N) A) -> (B) { B(i) = A(i) where i in 0:N * N }",
                          options={"disk_cache": False})
    np.testing.assert_array_equal(k(np.float32([5])), [5])
    with pytest.raises(tcdsl.TcShapeError, match=r"'A' would be read out of bounds: for sizes N=2, N_x_N=4"):
        k(np.float32([1, 2]))


def test_tuning_and_options_for_take_the_sizes_without_the_derived_one():
    from tcdsl.tune.tuner import _check_sizes

    k = tcdsl.compile(GRID, options={"disk_cache": False})
    sizes, _ = _check_sizes(k.frontend, {"N": 4, "G": 3}, None)
    assert sizes == [{"N": 4, "G": 3, "G_x_G": 9}]
    options, origin = k.options_for(N=4, G=3)
    assert origin and options is not None


def test_an_if_condition_over_a_product_of_sizes():
    k = tcdsl.compile("""
def steps(float(B, K, V) x) -> (y) {
  for t in T {
    if t < K * V { y(t, b) = x(b, t / V, t % V) }
    else { y(t, b) = 0 - 1 }
  }
}""", options={"disk_cache": False})
    x = np.arange(12, dtype=np.float32).reshape(1, 3, 4)
    np.testing.assert_array_equal(k(x, T=14)[:, 0], list(range(12)) + [-1, -1])


def test_a_product_with_a_constant_factor_first():
    k = tcdsl.compile("def f(float(N, M) x) -> (y) { y(i) = x(i / M / 2, i % M) where i in 0:2 * N * M }",
                      options={"disk_cache": False})
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(k(x), np.concatenate([np.tile(x[0], 2), np.tile(x[1], 2)]))
    assert "s2_x_N_x_M" in tcdsl.driver.emit(k, "tir")


def test_cli_run_computes_the_derived_size(tmp_path, capsys):
    from tcdsl.cli import main

    path = tmp_path / "flat.tc"
    path.write_text(FLAT)
    assert main(["run", str(path), "--sizes", "N=2,K=3,V=4"]) == 0
    out = capsys.readouterr().out
    assert "y: shape (2, 12) float32" in out and "s: shape (12, 2) float32" in out
    assert main(["run", str(path), "--sizes", "N=2,K=3,V=4,K_x_V=11"]) == 1
    assert "size 'K_x_V' is K * V = 12 here, but 11 given at the call" in capsys.readouterr().err


def test_cli_specializes_with_the_derived_size(tmp_path, capsys):
    from tcdsl.cli import main

    path = tmp_path / "flat.tc"
    path.write_text(FLAT)
    assert main(["compile", str(path), "--specialize", "after-scheduling", "--sizes", "N=2,K=3,V=4"]) == 0
    assert 'y: T.Buffer((2, 12), "float32"' in capsys.readouterr().out


def test_a_quotient_of_a_dimension_by_a_size_in_a_where_range():
    """``x.2 / KT`` in a where range is ``T / KT`` (``x``'s dimension 2 is
    declared ``T``): a derived size like it, not 'not a size expression'."""
    src = """def f(float(B,C,T) x, float(C,KT) w) -> (y) {
  y(b, c, t) +=! x(b, c, KT * t + k) * w(c, k) where t in 0:%s / KT
}"""
    by_dim, by_name = (tcdsl.compile(src % e, options={"disk_cache": False}) for e in ("x.2", "T"))
    rng = np.random.default_rng(5)
    for B, C, T, KT in [(2, 3, 11, 3), (1, 1, 4, 4), (1, 2, 5, 7)]:
        x, w = rng.random((B, C, T), np.float32), rng.random((C, KT), np.float32)
        n = T // KT
        want = np.einsum("bctk,ck->bct", x[:, :, :n * KT].reshape(B, C, n, KT).astype(np.float64), w)
        np.testing.assert_allclose(by_dim(x, w), want, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(by_dim(x, w), by_name(x, w))
