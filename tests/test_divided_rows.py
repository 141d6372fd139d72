"""Two parallel loops above register tiles run as one loop over rows
(tcdsl/codegen/collapse.py, ``divide``), their iterators ``r % E`` and
``r / E``, whatever tensors they index: a 3x3 convolution on narrow feature
maps, summed as ``y_p(h, v, n, o)`` (polyhedral/permute.py), takes its
tiles' rows from ``(v, n)``, and the weight's panel is copied once per output
row ``h`` for all of them, not once per output pixel.  Its input, read at
``x(n, c, h + kh, v + kw)``, is read through a flat view at a row's base
offset plus the rest (codegen/invariant.py, ``RowTerms``).  Results against
NumPy at odd sizes in every specialize mode, and inside guard pages."""
from __future__ import annotations

import re

import numpy as np
import pytest

import guard
import tcdsl

CONV = """def conv(float(N,C,H,W) x, float(O,C,3,3) w, float(O) bias) -> (y) {
  y(n, o, h, v) +=! x(n, c, h + kh, v + kw) * w(o, c, kh, kw)
  y(n, o, h, v) = y(n, o, h, v) + bias(o)
}"""
# rows (b, t) of the output below n, the input time-major: no pair of
# adjacent indices, and w's panel copied per b before
BATCH_FIRST = """def proj(float(N,T,B,I) x, float(I,J) w) -> (y) {
  y(n, b, t, j) +=! x(n, t, b, i) * w(i, j)
}"""


def _conv(x, w, bias):
    x, w = x.astype(np.float64), w.astype(np.float64)
    N, C, H, W = x.shape
    P, Q = H - 2, W - 2
    y = np.zeros((N, w.shape[0], P, Q))
    for kh in range(3):
        for kw in range(3):
            y += np.einsum("nchv,oc->nohv", x[:, :, kh:kh + P, kw:kw + Q], w[:, :, kh, kw])
    return y + bias[None, :, None, None]


def _enclosing_loops(script: str, line_pattern: str) -> list[str]:
    """The variables of the loops around the first line matching ``line_pattern``."""
    lines = script.splitlines()
    at = next(i for i, x in enumerate(lines) if re.search(line_pattern, x))
    depth = len(lines[at]) - len(lines[at].lstrip())
    out = []
    for x in reversed(lines[:at]):
        indent = len(x) - len(x.lstrip())
        if indent < depth and x.lstrip().startswith("for "):
            out += re.findall(r"(\w+)(?:,|\s+in\b)", x.lstrip()[4:].split(" in ")[0] + " in")
            depth = indent
    return out


def test_the_weight_panel_is_copied_once_per_output_row():
    s = tcdsl.compile(CONV, options={"disk_cache": False}).script
    # the narrow maps' branch: rows (v, n) in one loop of tiles
    loops = _enclosing_loops(s, r"w_t_panel\[.*\] = w_t\[")
    pixels = [v for v in loops if re.fullmatch(r"c\d+", v)]
    assert len(pixels) == 1, (loops, s)  # the output row only (before: for each (h, v))
    # the input read at the row's base offset plus the reduction's part
    assert re.search(r"x_flat\[row_term\d+\[r\] \+", s), s


def test_batch_first_rows_from_a_time_major_input():
    s = tcdsl.compile(BATCH_FIRST, options={"disk_cache": False}).script
    assert re.search(r"for c\d+_c\d+_b in range", s), s


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
@pytest.mark.slow
def test_divided_rows_match_numpy(mode):
    rng = np.random.default_rng(11)
    k = tcdsl.compile(CONV, specialize=mode, options={"disk_cache": False})
    # batch 1 and 3 (tiles across the pixels), one output pixel, W = 17 (the
    # narrow branch's widest), channels not a multiple of a vector
    for N, C, H, W, O in [(1, 3, 5, 6, 5), (3, 5, 4, 9, 7), (8, 16, 6, 6, 20), (2, 4, 3, 3, 3), (5, 2, 10, 17, 70)]:
        x = rng.standard_normal((N, C, H, W)).astype(np.float32)
        w = rng.standard_normal((O, C, 3, 3)).astype(np.float32)
        bias = rng.standard_normal(O).astype(np.float32)
        np.testing.assert_allclose(k(x, w, bias), _conv(x, w, bias), rtol=1e-4, atol=1e-4)
    p = tcdsl.compile(BATCH_FIRST, specialize=mode, options={"disk_cache": False})
    for N, T, B, I, J in [(2, 5, 3, 7, 9), (1, 1, 1, 4, 70), (3, 13, 6, 33, 20)]:
        x = rng.standard_normal((N, T, B, I)).astype(np.float32)
        w = rng.standard_normal((I, J)).astype(np.float32)
        want = np.einsum("ntbi,ij->nbtj", x.astype(np.float64), w.astype(np.float64))
        np.testing.assert_allclose(p(x, w), want, rtol=1e-4, atol=1e-4)


def test_divided_rows_stay_inside_their_tensors():
    # guard pages after and before every input and output (tests/guard.py)
    cases = [{"id": f"divided:{i}", "source": src, "sizes": sizes, "seed": i}
             for i, (src, sizes) in enumerate([
                 (CONV, {"N": 3, "C": 5, "H": 4, "W": 9, "O": 7}),
                 (CONV, {"N": 1, "C": 2, "H": 3, "W": 3, "O": 17}),
                 (BATCH_FIRST, {"N": 2, "T": 5, "B": 3, "I": 7, "J": 9})])]
    guard.assert_all_work(cases)
