"""A vector load at a small constant stride (a 2-D convolution of stride 2
reading ``x(n, c, 2 * h + kh, 2 * v + kw)`` across its vector loop ``v``, a
reversed index) is built as contiguous vector loads and a shuffle
(codegen/strided.py) rather than one scalar load per lane.  Checked: the
rewrite's lanes against the original ramp for every small stride and width,
that no such load is left in a CPU build, values against NumPy, and memory
with guard pages."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from tvm import tirx

import guard
import tcdsl
from helpers import rand
from tcdsl.codegen import strided


def _lanes(load, env: dict) -> list[int]:
    """The flat element each lane of ``load`` (a ramp, or a shuffle of ramps) reads, with ``b`` = env["b"]."""
    def ramp(r):
        base = _eval(r.indices[0].base, env)
        return [base + i * int(r.indices[0].stride.value) for i in range(int(r.indices[0].lanes))]
    if isinstance(load, strided._LOAD):
        return ramp(load)
    flat = [e for v in load.vectors for e in ramp(v)]
    return [flat[int(i.value)] for i in load.indices]


def _eval(e, env: dict) -> int:
    """A base index ``b + c`` (or ``b - c``, ``b``, ``c``) with ``b`` bound in ``env``."""
    if isinstance(e, strided._INT):
        return int(e.value)
    if isinstance(e, tirx.Var):
        return env[e.name]
    a, b = _eval(e.a, env), _eval(e.b, env)
    return a + b if type(e).__name__ == "Add" else a - b if type(e).__name__ == "Sub" else a * b


@pytest.mark.parametrize("stride,lanes", list(itertools.product([-4, -3, -2, -1, 2, 3, 4], [2, 4, 8, 16])))
def test_a_shuffle_of_contiguous_loads_reads_the_same_lanes_and_nothing_outside(stride, lanes):
    buf = tirx.decl_buffer((4096,), "float32", name="x")
    b = tirx.Var("b", "int32")
    load = tirx.BufferLoad(buf, [tirx.Ramp(b + 100, stride, lanes)])
    new = strided.shuffled(load)
    assert not isinstance(new, strided._LOAD), "not rewritten"
    for base in (0, 7, 1000):
        env = {"b": base}
        want = [base + 100 + stride * i for i in range(lanes)]
        assert _lanes(new, env) == want
        lo, hi = min(want), max(want)
        for v in new.vectors:
            first = _eval(v.indices[0].base, env)
            assert int(v.indices[0].stride.value) == 1
            assert lo <= first and first + int(v.indices[0].lanes) - 1 <= hi  # never outside the lanes' span
    # as few vectors as cover the span
    assert len(new.vectors) == -(-(abs(stride) * (lanes - 1) + 1) // lanes)


def test_other_loads_are_left_alone():
    buf = tirx.decl_buffer((4096,), "float32", name="x")
    b = tirx.Var("b", "int32")
    for idx in (tirx.Ramp(b, 1, 16), tirx.Ramp(b, 8, 16), tirx.Ramp(b, 0, 4), b):
        ld = tirx.BufferLoad(buf, [idx])
        assert strided.shuffled(ld).same_as(ld)


CONV2D_S2 = """
def conv(float(N,C,H,W) x, float(O,C,KH,KW) w) -> (y) {
  y(n, o, h, v) +=! x(n, c, 2 * h + kh, 2 * v + kw) * w(o, c, kh, kw)
      where h in 0:(H - KH) / 2 + 1, v in 0:(W - KW) / 2 + 1
}
"""
REVERSED = "def rev(float(N,M) x) -> (y) { y(i, j) = x(i, M - 1 - j) * 2 }"


def _conv2d(x, w, s=2):
    N, C, H, W = x.shape
    O, _, KH, KW = w.shape
    Ho, Wo = (H - KH) // s + 1, (W - KW) // s + 1
    y = np.zeros((N, O, Ho, Wo))
    for kh in range(KH):
        for kw in range(KW):
            win = x[:, :, kh: kh + s * (Ho - 1) + 1: s, kw: kw + s * (Wo - 1) + 1: s].astype(np.float64)
            y += np.einsum("nchv,oc->nohv", win, w[:, :, kh, kw])
    return y


def _is_strided(ld) -> bool:
    i = ld.indices[0] if len(ld.indices) == 1 else None
    return isinstance(i, strided._RAMP) and isinstance(i.stride, strided._INT) and i.stride.value not in (0, 1) \
        and abs(i.stride.value) <= strided.MAX_STRIDE


@pytest.mark.parametrize("src", [CONV2D_S2, REVERSED])
def test_no_strided_vector_load_reaches_llvm(src, monkeypatch):
    seen, left = [], []
    original = strided.shuffled

    def spy(ld):
        out = original(ld)
        if _is_strided(ld):
            seen.append(ld)
            if isinstance(out, strided._LOAD):
                left.append(ld)
        return out
    monkeypatch.setattr(strided, "shuffled", spy)
    tcdsl.compile(src, tuning_db=False, options={"disk_cache": False})
    assert seen  # the program reads at a small stride across its vector loop
    assert not left


def test_stride_two_conv2d_and_reversed_rows_match_numpy():
    rng = np.random.default_rng(3)
    k = tcdsl.compile(CONV2D_S2, tuning_db=False)
    for N, C, H, W, O in ((2, 3, 21, 70, 5), (1, 2, 7, 9, 4), (1, 1, 3, 3, 1), (2, 4, 11, 35, 9)):
        x, w = rand(rng, N, C, H, W), rand(rng, O, C, 3, 3)
        np.testing.assert_allclose(k(x, w), _conv2d(x, w), rtol=1e-4, atol=1e-5)
    r = tcdsl.compile(REVERSED, tuning_db=False)
    for n, m in ((3, 100), (2, 17), (1, 1)):
        x = rand(rng, n, m)
        np.testing.assert_allclose(r(x), x[:, ::-1] * 2)


def test_shuffled_loads_stay_inside_their_tensors():
    cases = [{"id": f"strided-loads:{i}", "source": src, "sizes": sizes, "seed": i}
             for i, (src, sizes) in enumerate([
                 (CONV2D_S2, {"N": 1, "C": 2, "H": 9, "W": 67, "O": 5, "KH": 3, "KW": 3}),
                 (CONV2D_S2, {"N": 2, "C": 1, "H": 5, "W": 35, "O": 4, "KH": 3, "KW": 1}),
                 (REVERSED, {"N": 3, "M": 67})])]
    records = guard.run_cases(cases)
    bad = guard.failures(records, cases)
    assert not bad, guard.report(bad)
    assert all(r["outcome"] == "works" for r in records), guard.counts(records)
