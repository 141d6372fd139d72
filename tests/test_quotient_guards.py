"""Reads guarded by a quotient or remainder by a size (polyhedral/bounds.py).

``p % W > 0 ? x(b, p - 1) : 0`` (the left neighbour in a flattened image)
reads ``x`` only at ``p >= 1``; isl cannot read ``p % W`` with ``W`` a size,
and the read was taken as evaluated everywhere: "read out of bounds for
every size", a compile error.  The checks now see ``p % W`` and ``p / W`` as
variables bounded as they are (``0 <= p % W < W``, ``p % W = p`` where
``p < W``, ``p / W = 0`` exactly where ``p < W``).

Where that is not enough (rotate-half on flat heads: ``e % D < D / 2 ?
-x(e + D / 2) : x(e - D / 2)`` is inside ``x`` only if ``D`` divides ``E``),
the read is a size guard (a warning at compile time), and a call whose
sizes the guard names is proved again with the sizes known, where ``e % 4``
is affine: in bounds, it runs the program as written (its guarded reads
clamped), else it is refused naming the read.  Before, every call was
refused.
"""
from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import tcdsl

sys.path.insert(0, str(Path(__file__).resolve().parent))
import guard  # noqa: E402

LEFT = "def f(float(B,P) x, float(W) w) -> (y) { y(b,p) = x(b,p) + (p % W > 0 ? x(b,p-1) : 0) where p in 0:P }"

STENCIL = """def st(float(B,HW) x, float(W) w, float(H) hh) -> (y) {
  y(b,p) = x(b,p) + (p / W > 0 ? x(b,p-W) : 0) + (p / W < H - 1 ? x(b,p+W) : 0)
         + (p % W > 0 ? x(b,p-1) : 0) + (p % W < W - 1 ? x(b,p+1) : 0) where p in 0:HW
}"""

ROTATE = """def rot(float(B,T,E) x, float(T,D) c, float(T,D) s) -> (y) {
  y(b,t,e) = x(b,t,e) * c(t, e % D)
           + ((e % D < D / 2) ? -x(b,t,e + D/2) : x(b,t,e - D/2)) * s(t, e % D) where e in 0:E
}"""

NO_CACHE = {"disk_cache": False}


def _compile(src, **kw):
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        k = tcdsl.compile(src, options=NO_CACHE, **kw)
    return k, [str(w.message) for w in got]


def _stencil_ref(x, H, W):
    B = x.shape[0]
    X = np.pad(x.reshape(B, H, W), ((0, 0), (1, 1), (1, 1)))
    return (X[:, 1:-1, 1:-1] + X[:, :-2, 1:-1] + X[:, 2:, 1:-1] + X[:, 1:-1, :-2] + X[:, 1:-1, 2:]).reshape(B, -1)


def _rotate_ref(x, c, s):
    E, D = x.shape[-1], c.shape[-1]
    h = D // 2
    xr = x.reshape(*x.shape[:-1], E // D, D)
    rot = np.concatenate([-xr[..., h:], xr[..., :h]], -1).reshape(x.shape)  # (D even)
    return x * np.tile(c, (1, E // D))[None] + rot * np.tile(s, (1, E // D))[None]


def test_a_remainder_guard_proves_the_left_neighbour_in_bounds():
    k, said = _compile(LEFT)
    assert not said, said  # no read out of bounds, for any size
    rng = np.random.default_rng(0)
    for P, W in ((12, 4), (7, 3), (1, 5), (10, 1)):
        x = rng.standard_normal((2, P)).astype("float32")
        ref = x.copy()
        left = np.arange(1, P) % W > 0
        ref[:, 1:] += np.where(left, x[:, :-1], 0)
        np.testing.assert_allclose(k(x, np.zeros(W, "float32")), ref, rtol=1e-6)


def test_quotient_and_remainder_guards_of_a_flattened_stencil():
    k, said = _compile(STENCIL)
    # p + W and p + 1 are inside x only where HW is H * W: named, with sizes where they leave it
    assert len(said) == 2 and all("'x' may be read out of bounds" in m for m in said), said
    assert not any("x(0, -" in m for m in said), said  # p - W and p - 1 are proved by p / W > 0, p % W > 0
    rng = np.random.default_rng(1)
    for H, W in ((5, 7), (1, 4), (3, 1), (8, 16)):
        x = rng.standard_normal((2, H * W)).astype("float32")
        got = k(x, np.zeros(W, "float32"), np.zeros(H, "float32"))
        np.testing.assert_allclose(got, _stencil_ref(x, H, W), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["never", "auto"])
def test_rotate_half_on_flat_heads_runs_where_the_head_size_divides(mode):
    k, said = _compile(ROTATE, specialize=mode)
    assert any("'x' may be read out of bounds" in m for m in said), said  # E need not be a multiple of D
    rng = np.random.default_rng(2)
    for B, T, NH, D in ((2, 3, 2, 4), (1, 5, 3, 6), (2, 2, 1, 2), (1, 4, 4, 8)):
        x = rng.standard_normal((B, T, NH * D)).astype("float32")
        c, s = rng.standard_normal((T, D)).astype("float32"), rng.standard_normal((T, D)).astype("float32")
        for _ in range(2):  # the second call takes the checked sizes' path
            np.testing.assert_allclose(k(x, c, s), _rotate_ref(x, c, s), rtol=1e-5, atol=1e-6)
    c, s = np.ones((3, 4), "float32"), np.ones((3, 4), "float32")
    with pytest.raises(tcdsl.TcShapeError, match=r"E=9, D=4.*'x' would be read out of bounds.*x\(0, 0, 10\)"):
        k(np.ones((2, 3, 9), "float32"), c, s)


def test_a_guard_that_holds_everywhere_proves_nothing():
    # i % N < N always holds: x(i + N) is read at every i, outside x for every size
    src = "def f(float(N) x) -> (y) { y(i) = (i % N < N ? x(i + N) : 0) where i in 0:N }"
    with pytest.raises(tcdsl.TcError, match="'x' is read out of bounds for every size"):
        tcdsl.compile(src, options=NO_CACHE)


def test_under_guard_pages():
    cases = []
    for mode in ("never", "after-scheduling", "before-scheduling"):
        cases += [
            {"id": f"left:{mode}", "source": LEFT, "mode": mode,
             "settings": [{"B": 2, "P": 12, "W": 4}, {"B": 1, "P": 5, "W": 7}, {"B": 3, "P": 9, "W": 1}]},
            {"id": f"stencil:{mode}", "source": STENCIL, "mode": mode,
             "settings": [{"B": 2, "HW": 35, "W": 7, "H": 5}, {"B": 1, "HW": 4, "W": 1, "H": 4}]},
            {"id": f"rotate:{mode}", "source": ROTATE, "mode": mode,
             "settings": [{"B": 2, "T": 3, "E": 8, "D": 4}, {"B": 1, "T": 2, "E": 12, "D": 6},
                          {"B": 1, "T": 2, "E": 5, "D": 5}]},
            {"id": f"rotate_refused:{mode}", "source": ROTATE, "mode": mode,
             "sizes": {"B": 2, "T": 3, "E": 9, "D": 4}, "expect": "error"},
        ]
    records = guard.run_cases(cases)
    bad = guard.failures(records, cases)
    assert not bad, guard.report(bad)
    works = [r["id"] for r in records if r["outcome"] == "works"]
    assert len(works) == 9, guard.counts(records)
