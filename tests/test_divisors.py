"""Division by a size as a multiplication (codegen/divisors.py): the
quotient and remainder of every ``0 <= p < 2**31`` by every size agree with
NumPy's, 0 by a size of 0; a flat index's digits read through it; the
division is a multiplication in the generated code."""
from __future__ import annotations

import re

import numpy as np
import pytest
import tvm
from tvm import tirx

import tcdsl
from tcdsl.codegen import divisors
from tcdsl.codegen.expr import INDEX

OPTS = {"disk_cache": False}


def _kernel(op: str):
    d = tirx.Var("d", INDEX)
    n = tirx.Var("n", INDEX)
    p = tirx.decl_buffer((n,), "int32", name="p")
    q = tirx.decl_buffer((n,), "int32", name="q")
    i = tirx.Var("i", INDEX)
    with divisors.size_divisors() as divs:
        body = tirx.For(i, 0, n, tirx.ForKind.SERIAL, tirx.BufferStore(q, divisors.divide(op, p[i], d), [i]))
        body = divisors.bind(divs, body)
    func = tirx.PrimFunc([d, n, p, q], body).with_attr("global_symbol", "main")
    return tvm.compile(tvm.IRModule({"main": func}), target="llvm")["main"]


@pytest.mark.parametrize("op", ["/", "%"])
def test_every_divisor_agrees_with_numpy(op):
    f = _kernel(op)
    rng = np.random.default_rng(1)
    top = 2**31 - 1
    ds = [1, 2, 3, 5, 7, 10, 641, 6700417, 2**16, 2**16 + 1, 2**30 - 1, 2**30, 2**30 + 1, top - 1, top]
    ds += [int(x) for x in rng.integers(1, top, 40)] + [int(x) for x in rng.integers(1, 5000, 40)]
    for d in ds:
        ps = np.concatenate([rng.integers(0, top, 2000), [0, 1, top, top - 1, d - 1, d, d + 1],
                             (np.arange(1, 50) * d) % top, (np.arange(1, 50) * d - 1) % top]).astype(np.int64)
        ps = np.clip(ps, 0, top).astype(np.int32)
        out = np.zeros_like(ps)
        dev = tvm.cpu()
        args = [tvm.runtime.tensor(ps, dev), tvm.runtime.tensor(out, dev)]
        f(d, len(ps), *args)
        got = args[1].numpy()
        want = ps // d if op == "/" else ps % d
        np.testing.assert_array_equal(got, want, err_msg=f"divisor {d}")
    ps = np.arange(10, dtype=np.int32)
    args = [tvm.runtime.tensor(ps), tvm.runtime.tensor(np.ones(10, np.int32))]
    f(0, 10, *args)
    np.testing.assert_array_equal(args[1].numpy(), np.zeros(10, np.int32))  # by 0: 0, as NumPy gives


FLAT = """def f(float(B,C,H,W) x) -> (y) {
  y(b, c, p) = x(b, c, p / W, p % W) where p in 0:H*W
}"""


@pytest.mark.parametrize("mode", ["never", "after-scheduling"])
def test_a_flat_index_reads_its_digits(mode):
    k = tcdsl.compile(FLAT, specialize=mode, options=OPTS)
    if mode == "never":
        assert "div0_m" in k.script and "floordiv" not in k.script and "truncdiv(c" not in k.script
    rng = np.random.default_rng(2)
    for B, C, H, W in [(1, 1, 1, 1), (2, 3, 5, 7), (1, 2, 33, 17), (1, 1, 3, 1000), (1, 1, 70, 3)]:
        x = rng.random((B, C, H, W)).astype(np.float32)
        np.testing.assert_array_equal(k(x), x.reshape(B, C, H * W))


def test_cuda_keeps_the_division():
    from tcdsl.codegen.lower import ProgramLowering
    assert ProgramLowering.size_divisions is False


GROUP_SCALED = """def gl(float(M,K) x, float(N,K) w, float(N,NG) sc, float(G) off) -> (y) {
  y(m, n) +=! x(m, k) * (w(n, k) * sc(n, k / (K / NG)) + off(k % G))
}"""


@pytest.mark.parametrize("M,K,N,NG,G", [(3, 4096, 5, 32, 7), (2, 60, 3, 4, 16), (4, 50, 5, 5, 3), (1, 96, 2, 3, 97),
                                         (2, 40, 3, 40, 1), (2, 17, 2, 1, 5)])
def test_vector_lanes_of_one_quotient_read_one_scale(M, K, N, NG, G):
    """A read at a quotient by a size along the vector loop (a per-group
    scale, ``k / (K / NG)``) is one scalar where the vector's lanes share
    their quotient, a test per vector (groups of 128, 15, 10 elements, of
    one, remainders alongside); the numbers are NumPy's either way."""
    k = tcdsl.compile(GROUP_SCALED, options=OPTS)
    # the test, per vector: its first and last lane's quotients are equal
    assert re.search(r"if T\.Cast\(\"int32\", T\.Cast\(\"uint64\", [^\n]*\) \* div\d_m >> div\d_s\) == T\.Cast\(", k.script)
    rng = np.random.default_rng(K)
    x, w = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((N, K)).astype(np.float32)
    sc, off = rng.uniform(0.5, 1.5, (N, NG)).astype(np.float32), rng.standard_normal(G).astype(np.float32)
    D, k_used = K // NG, np.arange(K)
    wd = w.astype(np.float64) * sc.astype(np.float64)[:, k_used // D] + off.astype(np.float64)[k_used % G]
    np.testing.assert_allclose(k(x, w, sc, off), x.astype(np.float64) @ wd.T, rtol=1e-4, atol=1e-4)
