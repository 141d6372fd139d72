"""The test corpus: TC programs under tests/programs with NumPy references.

Each ``Case`` names a ``def`` in one of the ``.tc`` files next to this module,
says how to make its inputs for a given size setting, and gives a NumPy
reference that computes every output of the def's ``-> (...)`` list following
the semantics of SPEC.md section 1 (TC semantics plus tcdsl's extensions):

* outputs that the kernel allocates start as zeros, so a reduction without
  ``!`` (``+=``, ``*=``, ``min=``, ``max=``) combines with 0;
* ``op=!`` first sets the written range to the identity of ``op``;
* ranges are the maximal ones that read nothing out of bounds, and a tensor's
  size along a dimension runs from 0 to the largest upper bound written;
* integer ``/`` and ``%`` are floor division and its remainder.

References compute in float64 (or exactly, in integers) and cast to the
output's element type.  This module must not import ``tcdsl``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class Case:
    name: str                     # unique id, e.g. "matmul" or "conv2d_strided"
    file: str                     # file name inside tests/programs, e.g. "matmul.tc"
    entry: str                    # the def to compile
    make_inputs: Callable[..., list[np.ndarray]]   # make_inputs(rng, **sizes) -> inputs in the def's parameter order
    reference: Callable[..., tuple[np.ndarray, ...]]  # reference(*inputs) -> ALL outputs of `-> (...)`, in order
    sizes: tuple[dict[str, int], ...]   # size settings to test (small)
    rtol: float = 1e-4
    atol: float = 1e-5
    tags: tuple[str, ...] = ()    # e.g. ("rnn",), ("indirect",), ("int",)


CASES: list[Case] = []


def by_name(name: str) -> Case:
    for c in CASES:
        if c.name == name:
            return c
    raise KeyError(name)


def representative() -> list[Case]:
    """The cases a test runs by default when running every case would take
    too long (the rest under ``pytest -m slow``): in the order of CASES, the
    first case of every ``.tc`` file, and the first case of every tag that
    no case picked so far has.  So every file and every tag is run."""
    files: set[str] = set()
    tags: set[str] = set()
    out = []
    for c in CASES:
        if c.file not in files or not tags.issuperset(c.tags):
            out.append(c)
            files.add(c.file)
            tags.update(c.tags)
    return out


def params(cases=None, default=None) -> list:
    """``pytest.param`` of every case of ``cases`` (default: CASES), with id
    its name; those not in ``default`` (default: ``representative()``) are
    marked ``slow``."""
    import pytest

    keep = {c.name for c in (representative() if default is None else default)}
    return [pytest.param(c, id=c.name, marks=[] if c.name in keep else [pytest.mark.slow])
            for c in (CASES if cases is None else cases)]


def _add(name, file, entry, make_inputs, reference, sizes, *, rtol=1e-4,
         atol=1e-5, tags=()):
    CASES.append(Case(name=name, file=file, entry=entry,
                      make_inputs=make_inputs, reference=reference,
                      sizes=tuple(dict(s) for s in sizes), rtol=rtol,
                      atol=atol, tags=tuple(tags)))


# --------------------------------------------------------------------------
# helpers

F32 = np.float32
I32 = np.int32


def _rn(rng, *shape):
    """standard normal float32 (shape () gives a 0-rank array)"""
    return np.asarray(rng.standard_normal(shape), dtype=F32)


def _un(rng, lo, hi, *shape):
    """uniform float32 in [lo, hi)"""
    return np.asarray(rng.uniform(lo, hi, size=shape), dtype=F32)


def _ri(rng, lo, hi, *shape, dtype=I32):
    """integers in [lo, hi)"""
    return np.asarray(rng.integers(lo, hi, size=shape), dtype=dtype)


def _d(x):
    return np.asarray(x, dtype=np.float64)


def _o(x, dtype=F32):
    """cast a result to the output type; keeps 0-rank results as arrays"""
    return np.asarray(x).astype(dtype)


def _relu(x):
    return np.maximum(x, 0.0)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _rsqrt(x):
    return 1.0 / np.sqrt(x)


def _conv(I, W, sh=1, sw=1):
    """valid 2-D correlation O(n,m,h,w) = sum I(n,c,sh*h+kh,sw*w+kw) W(m,c,kh,kw)"""
    I, W = _d(I), _d(W)
    N, C, H, Wd = I.shape
    M, _, KH, KW = W.shape
    OH, OW = (H - KH) // sh + 1, (Wd - KW) // sw + 1
    O = np.zeros((N, M, OH, OW))
    for kh in range(KH):
        for kw in range(KW):
            patch = I[:, :, kh:kh + sh * (OH - 1) + 1:sh, kw:kw + sw * (OW - 1) + 1:sw]
            O += np.einsum("nchw,mc->nmhw", patch, W[:, :, kh, kw])
    return O


def _group_conv(I, W, sh=1, sw=1):
    """I (N,G,C,H,W), W (G,F,C,KH,KW) -> (N,G,F,OH,OW)"""
    I, W = _d(I), _d(W)
    outs = [_conv(I[:, g], W[g], sh, sw) for g in range(I.shape[1])]
    return np.stack(outs, axis=1)


def _bc(x, ndim, axes):
    """reshape x so its dims sit at `axes` of an ndim-array (for broadcasting)"""
    shape = [1] * ndim
    for a, s in zip(axes, np.shape(x)):
        shape[a] = s
    return np.reshape(x, shape)


# ==========================================================================
# tc/library
# ==========================================================================

def _mm_inputs(tA, tB):
    def make(rng, N, K, M):
        A = _rn(rng, K, N) if tA else _rn(rng, N, K)
        B = _rn(rng, M, K) if tB else _rn(rng, K, M)
        return [A, B]
    return make


def _mm_ref(tA, tB):
    def ref(A, B):
        A, B = _d(A), _d(B)
        A = A.T if tA else A
        B = B.T if tB else B
        return (_o(A @ B),)
    return ref


_MM_SIZES = ({"N": 1, "K": 1, "M": 1}, {"N": 3, "K": 5, "M": 7},
             {"N": 16, "K": 17, "M": 9}, {"N": 1, "K": 32, "M": 2})
for _name, _ta, _tb in (("matmul", 0, 0), ("matmul_tn", 1, 0),
                        ("matmul_nt", 0, 1), ("matmul_tt", 1, 1)):
    _add(_name, "matmul.tc", _name, _mm_inputs(_ta, _tb), _mm_ref(_ta, _tb),
         _MM_SIZES, tags=("reduction", "library"))


_add("batch_matmul", "batch_matmul.tc", "batch_matmul",
     lambda rng, B, N, M, K: [_rn(rng, B, N, M), _rn(rng, B, M, K)],
     lambda X, Y: (_o(np.einsum("bnm,bmk->bnk", _d(X), _d(Y))),),
     ({"B": 1, "N": 1, "M": 1, "K": 1}, {"B": 3, "N": 5, "M": 4, "K": 6},
      {"B": 7, "N": 9, "M": 13, "K": 3}),
     tags=("reduction", "library"))


def _conv_inputs(rng, N, C, H, W, M, KH, KW):
    return [_rn(rng, N, C, H, W), _rn(rng, M, C, KH, KW), _rn(rng, M)]


def _conv_bias_ref(sh, sw):
    def ref(I, W1, B):
        return (_o(_conv(I, W1, sh, sw) + _bc(_d(B), 4, [1])),)
    return ref


_CONV_SIZES = ({"N": 1, "C": 1, "H": 1, "W": 1, "M": 1, "KH": 1, "KW": 1},
               {"N": 2, "C": 3, "H": 7, "W": 6, "M": 4, "KH": 3, "KW": 2},
               {"N": 1, "C": 4, "H": 11, "W": 9, "M": 5, "KH": 3, "KW": 3},
               {"N": 3, "C": 2, "H": 4, "W": 5, "M": 2, "KH": 4, "KW": 5})
_add("convolution", "convolution.tc", "convolution", _conv_inputs,
     _conv_bias_ref(1, 1), _CONV_SIZES, atol=1e-4,
     tags=("reduction", "library", "conv"))
_add("convolution_s2x2", "convolution.tc", "convolution_s2x2", _conv_inputs,
     _conv_bias_ref(2, 2), _CONV_SIZES + (
         {"N": 2, "C": 3, "H": 8, "W": 9, "M": 3, "KH": 2, "KW": 3},),
     atol=1e-4, tags=("reduction", "library", "conv", "strided"))
_add("convolution_s2x3", "convolution.tc", "convolution_s2x3", _conv_inputs,
     _conv_bias_ref(2, 3), _CONV_SIZES + (
         {"N": 2, "C": 3, "H": 10, "W": 13, "M": 3, "KH": 3, "KW": 2},),
     atol=1e-4, tags=("reduction", "library", "conv", "strided"))


def _gconv_inputs(rng, N, G, C, H, W, F, KH, KW):
    return [_rn(rng, N, G, C, H, W), _rn(rng, G, F, C, KH, KW), _rn(rng, G, F)]


def _gconv_ref(sh, sw):
    def ref(I, W1, B):
        return (_o(_group_conv(I, W1, sh, sw) + _bc(_d(B), 5, [1, 2])),)
    return ref


_GCONV_SIZES = ({"N": 1, "G": 1, "C": 1, "H": 1, "W": 1, "F": 1, "KH": 1, "KW": 1},
                {"N": 2, "G": 3, "C": 2, "H": 6, "W": 7, "F": 2, "KH": 3, "KW": 2},
                {"N": 1, "G": 2, "C": 3, "H": 9, "W": 8, "F": 4, "KH": 3, "KW": 3})
_add("group_convolution", "group_convolution.tc", "group_convolution",
     _gconv_inputs, _gconv_ref(1, 1), _GCONV_SIZES, atol=1e-4,
     tags=("reduction", "library", "conv"))
_add("group_convolution_s2x2", "group_convolution.tc", "group_convolution_s2x2",
     _gconv_inputs, _gconv_ref(2, 2), _GCONV_SIZES, atol=1e-4,
     tags=("reduction", "library", "conv", "strided"))


def _bn_ref(momentum, eps, I, rMeanIn, rVarIn):
    m, e, I = float(_d(momentum).reshape(-1)[0]), float(_d(eps).reshape(-1)[0]), _d(I)
    N, C, H, W = I.shape
    cnt = N * H * W
    mean = I.sum(axis=(0, 2, 3)) / cnt
    rMeanOut = (1 - m) * _d(rMeanIn) + m * mean
    centered = I - _bc(rMeanOut, 4, [1])
    variance = centered * centered
    expectedVariance = ((variance + e) / cnt).sum(axis=(0, 2, 3))
    rVarOut = _rsqrt((1 - m) * _d(rVarIn) + m * expectedVariance)
    O = centered * _bc(rVarOut, 4, [1])
    return tuple(_o(x) for x in (O, rMeanOut, rVarOut, mean, centered,
                                  variance, expectedVariance, O))


_BN_SIZES = ({"N": 1, "C": 1, "H": 1, "W": 1}, {"N": 2, "C": 3, "H": 4, "W": 5},
             {"N": 3, "C": 5, "H": 7, "W": 2})
_add("spatialBatchNorm", "batchnorm.tc", "spatialBatchNorm",
     lambda rng, N, C, H, W: [np.array(0.1, F32), np.array(1e-5, F32),
                              _rn(rng, N, C, H, W), _rn(rng, C),
                              _un(rng, 0.5, 2.0, C)],
     _bn_ref, _BN_SIZES, rtol=1e-3, atol=1e-4,
     tags=("reduction", "library", "scalar", "multi-output", "norm"))


def _fc_inputs(n_layers):
    names = ["M", "N", "O", "P", "Q"]

    def make(rng, **s):
        ins = [_rn(rng, s["B"], s["M"])]
        for li in range(n_layers):
            fin, fout = s[names[li]], s[names[li + 1]]
            ins += [_un(rng, -0.5, 0.5, fout, fin), _un(rng, -0.5, 0.5, fout)]
        return ins
    return make


def _fc_ref(x, *wb):
    outs, h = [], _d(x)
    for W, b in zip(wb[0::2], wb[1::2]):
        h = _relu(h @ _d(W).T + _d(b))
        outs.append(_o(h))
    return tuple(outs)


_FC_SIZES = ({"B": 1, "M": 1, "N": 1, "O": 1, "P": 1, "Q": 1},
             {"B": 3, "M": 7, "N": 5, "O": 6, "P": 4, "Q": 3},
             {"B": 16, "M": 33, "N": 12, "O": 9, "P": 10, "Q": 5})


def _fc_sizes(keys):
    return tuple({k: s[k] for k in keys} for s in _FC_SIZES)


for _n, _name in ((1, "func_fcrelu"), (2, "func_2fcrelu"), (3, "func_3fcrelu"),
                  (4, "func_4fcrelu")):
    _add(_name, "fcrelu.tc", _name, _fc_inputs(_n), _fc_ref,
         _fc_sizes(["B", "M", "N", "O", "P", "Q"][:_n + 2]), atol=1e-5,
         tags=("reduction", "library", "builtin") + (("multi-output",) if _n > 1 else ()))


def _lut_sum(LUT, I):
    """O(i, j) = sum_k LUT(I(i, k), j)"""
    return _d(LUT)[np.asarray(I)].sum(axis=1)


_add("lut", "lut.tc", "lut",
     lambda rng, E, D, B, L: [_rn(rng, E, D), _ri(rng, 0, E, B, L)],
     lambda LUT, I: (_o(_lut_sum(LUT, I)),),
     ({"E": 1, "D": 1, "B": 1, "L": 1}, {"E": 10, "D": 4, "B": 3, "L": 5},
      {"E": 37, "D": 8, "B": 6, "L": 13}),
     tags=("indirect", "reduction", "library"))
_add("func_2lut", "lut.tc", "func_2lut",
     lambda rng, E1, E2, D, B, L1, L2: [_rn(rng, E1, D), _ri(rng, 0, E1, B, L1),
                                        _rn(rng, E2, D), _ri(rng, 0, E2, B, L2)],
     lambda LUT1, I1, LUT2, I2: (_o(_lut_sum(LUT1, I1)), _o(_lut_sum(LUT2, I2))),
     ({"E1": 1, "E2": 1, "D": 1, "B": 1, "L1": 1, "L2": 1},
      {"E1": 10, "E2": 7, "D": 4, "B": 3, "L1": 5, "L2": 2},
      {"E1": 20, "E2": 31, "D": 9, "B": 5, "L1": 3, "L2": 8}),
     tags=("indirect", "reduction", "library", "multi-output"))


def _dper_inputs(rng, B, M, N, L1, L2, E1, E2, D):
    return [_rn(rng, B, M), _ri(rng, 0, E1, B, L1), _ri(rng, 0, E2, B, L2),
            _rn(rng, N, M), _rn(rng, N), _rn(rng, E1, D), _rn(rng, E2, D)]


def _dper_ref(I1, I2, I3, W1, B1, LUT1, LUT2):
    O1 = _d(I1) @ _d(W1).T + _d(B1)
    return (_o(O1), _o(_lut_sum(LUT1, I2)), _o(_lut_sum(LUT2, I3)))


_add("dper_lut_concat", "dper_lut_concat.tc", "dper_lut_concat",
     _dper_inputs, _dper_ref,
     ({"B": 1, "M": 1, "N": 1, "L1": 1, "L2": 1, "E1": 1, "E2": 1, "D": 1},
      {"B": 4, "M": 6, "N": 5, "L1": 3, "L2": 2, "E1": 9, "E2": 11, "D": 7}),
     atol=1e-4, tags=("indirect", "reduction", "library", "multi-output"))

for _r in range(1, 6):
    _add(f"copy_{_r}d", "copy.tc", f"copy_{_r}d",
         (lambda r: lambda rng, **s: [_rn(rng, *[s[f"P{i}"] for i in range(r)])])(_r),
         lambda I: (_o(I),),
         ({f"P{i}": 1 for i in range(_r)},
          {f"P{i}": (3, 5, 2, 4, 3)[i] for i in range(_r)},
          {f"P{i}": (7, 1, 6, 1, 5)[i] for i in range(_r)}),
         tags=("library", "copy"))


# ==========================================================================
# tc/benchmarks
# ==========================================================================

_MOM_SIZES = ({"N": 1, "K": 1}, {"N": 5, "K": 7}, {"N": 33, "K": 64}, {"N": 2, "K": 129})


def _mom_in(rng, N, K):
    return [_rn(rng, N, K)]


_add("sum_2D_1D", "moments.tc", "sum_2D_1D", _mom_in,
     lambda I: (_o(_d(I).sum(1)),), _MOM_SIZES, atol=1e-4,
     tags=("reduction", "benchmark"))
_add("mean_2D_1D", "moments.tc", "mean_2D_1D", _mom_in,
     lambda I: (_o(_d(I).mean(1)),), _MOM_SIZES, tags=("reduction", "benchmark"))
_add("sum_squares_2D_1D", "moments.tc", "sum_squares_2D_1D", _mom_in,
     lambda I: (_o((_d(I) ** 2).sum(1)),), _MOM_SIZES, atol=1e-4,
     tags=("reduction", "benchmark"))
_add("var_2D_1D", "moments.tc", "var_2D_1D",
     lambda rng, N, K: [_rn(rng, N, K), _rn(rng, N)],
     lambda I, mean: (_o((_d(I) ** 2).sum(1) / I.shape[1] - _d(mean) ** 2),),
     _MOM_SIZES, tags=("reduction", "benchmark"))
_add("sum_and_squares_2D_1D", "moments.tc", "sum_and_squares_2D_1D", _mom_in,
     lambda I: (_o(_d(I).sum(1)), _o((_d(I) ** 2).sum(1))), _MOM_SIZES,
     atol=1e-4, tags=("reduction", "benchmark", "multi-output"))


def _moments2(I):
    I = _d(I)
    mean = I.mean(1)
    return (_o(mean), _o((I * I).sum(1) / I.shape[1] - mean * mean))


_add("moments2_2D_1D", "moments.tc", "moments2_2D_1D", _mom_in, _moments2,
     _MOM_SIZES, atol=1e-5, tags=("reduction", "benchmark", "multi-output"))
_add("gn_moments2_2D_1D", "group_normalization.tc", "moments2_2D_1D", _mom_in,
     _moments2, _MOM_SIZES, atol=1e-5, tags=("reduction", "benchmark", "multi-output"))

_GN_SIZES = ({"N": 1, "G": 1, "D": 1, "H": 1, "W": 1},
             {"N": 2, "G": 3, "D": 2, "H": 4, "W": 5},
             {"N": 3, "G": 2, "D": 4, "H": 3, "W": 7})


def _gn_in(rng, N, G, D, H, W):
    return [_rn(rng, N, G, D, H, W), _un(rng, 0.5, 1.5, G, D), _rn(rng, G, D)]


def _gn_apply(I, gamma, beta, mean, rstd):
    I = _d(I)
    return (_bc(_d(gamma), 5, [1, 2]) * (I - _bc(mean, 5, [0, 1]))
            * _bc(rstd, 5, [0, 1]) + _bc(_d(beta), 5, [1, 2]))


_add("group_normalization", "group_normalization.tc", "group_normalization",
     lambda rng, N, G, D, H, W: _gn_in(rng, N, G, D, H, W)
     + [_rn(rng, N, G), _un(rng, 0.5, 2.0, N, G)],
     lambda I, gamma, beta, mean, var: (
         _o(_gn_apply(I, gamma, beta, _d(mean), _rsqrt(_d(var) + 1e-5))),),
     _GN_SIZES, rtol=1e-4, atol=1e-5, tags=("benchmark", "builtin", "norm"))


def _gn_single_ref(I, gamma, beta):
    Id = _d(I)
    cnt = Id.shape[2] * Id.shape[3] * Id.shape[4]
    s = Id.sum(axis=(2, 3, 4))
    ss = (Id * Id).sum(axis=(2, 3, 4))
    rstd = _rsqrt(ss / cnt - s * s / cnt / cnt + 1e-5)
    return (_o(_gn_apply(I, gamma, beta, s / cnt, rstd)), _o(s), _o(ss))


_add("group_normalization_single_kernel", "group_normalization.tc",
     "group_normalization_single_kernel", _gn_in, _gn_single_ref, _GN_SIZES,
     rtol=1e-3, atol=1e-3, tags=("benchmark", "reduction", "builtin", "norm", "multi-output"))

_KRON_SIZES = ({"M": 1, "N0": 1, "N1": 1, "N2": 1, "D0": 1, "D1": 1, "D2": 1},
               {"M": 2, "N0": 3, "N1": 4, "N2": 5, "D0": 2, "D1": 3, "D2": 4},
               {"M": 3, "N0": 5, "N1": 2, "N2": 6, "D0": 4, "D1": 1, "D2": 7})


def _sub(keys):
    return tuple({k: s[k] for k in keys} for s in _KRON_SIZES)


_add("Kronecker3_1", "kronecker.tc", "Kronecker3_1",
     lambda rng, D2, N2, M, N0, N1: [_rn(rng, D2, N2), _rn(rng, M, N0, N1, N2)],
     lambda W2, X: (_o(np.einsum("mabr,dr->mabd", _d(X), _d(W2))),),
     _sub(["D2", "N2", "M", "N0", "N1"]), tags=("reduction", "benchmark"))
_add("Kronecker3_2", "kronecker.tc", "Kronecker3_2",
     lambda rng, D1, N1, M, N0, D2: [_rn(rng, D1, N1), _rn(rng, M, N0, N1, D2)],
     lambda W1, XW2: (_o(np.einsum("mard,er->maed", _d(XW2), _d(W1))),),
     _sub(["D1", "N1", "M", "N0", "D2"]), tags=("reduction", "benchmark"))
_add("Kronecker3_3", "kronecker.tc", "Kronecker3_3",
     lambda rng, D0, N0, M, D1, D2: [_rn(rng, D0, N0), _rn(rng, M, N0, D1, D2)],
     lambda W0, XW2W1: (_o(np.einsum("mrbc,ar->mabc", _d(XW2W1), _d(W0))),),
     _sub(["D0", "N0", "M", "D1", "D2"]), tags=("reduction", "benchmark"))


def _kron_full(W0, W1, W2, X):
    XW2 = np.einsum("mabr,dr->mabd", _d(X), _d(W2))
    XW2W1 = np.einsum("mard,er->maed", XW2, _d(W1))
    Y = np.einsum("mrbc,ar->mabc", XW2W1, _d(W0))
    return (_o(Y), _o(XW2), _o(XW2W1))


_add("Kronecker3Full", "kronecker.tc", "Kronecker3Full",
     lambda rng, D0, N0, D1, N1, D2, N2, M: [
         _rn(rng, D0, N0), _rn(rng, D1, N1), _rn(rng, D2, N2), _rn(rng, M, N0, N1, N2)],
     _kron_full, _KRON_SIZES, atol=1e-4,
     tags=("reduction", "benchmark", "multi-output"))


def _wavenet_in(rng, B, RESIDUAL_C, RECEPTIVE_FIELD, DILATION_C, SKIP_C, DILATION_FACTOR):
    RC, RF, DC, SK = RESIDUAL_C, RECEPTIVE_FIELD, DILATION_C, SKIP_C
    return [_rn(rng, B, RC, RF),
            _un(rng, -0.5, 0.5, DC, RC, 2), _un(rng, -0.5, 0.5, DC),
            _un(rng, -0.5, 0.5, DC, RC, 2), _un(rng, -0.5, 0.5, DC),
            _un(rng, -0.5, 0.5, RC, DC), _un(rng, -0.5, 0.5, RC),
            _un(rng, -0.5, 0.5, SK, DC), _un(rng, -0.5, 0.5, SK),
            _rn(rng, DILATION_FACTOR)]


def _wavenet_ref(Data, FW, FB, GW, GB, ResW, ResB, SkipW, SkipB, Dilation):
    Data = _d(Data)
    DF = Dilation.shape[0]
    RF = Data.shape[2]

    def dil_conv(Wt, bias):
        out = np.einsum("brf,dr->bdf", Data, _d(Wt)[:, :, 1]) + _bc(_d(bias), 3, [1])
        if DF < RF:
            out[:, :, DF:] += np.einsum("brf,dr->bdf", Data[:, :, :RF - DF], _d(Wt)[:, :, 0])
        return out
    F = dil_conv(FW, FB)
    G = dil_conv(GW, GB)
    NL = np.tanh(F) * (1.0 / (1.0 + np.exp(-G)))
    Res = Data + _bc(_d(ResB), 3, [1]) + np.einsum("bdf,rd->brf", NL, _d(ResW))
    Skip = np.einsum("bdf,sd->bsf", NL, _d(SkipW)) + _bc(_d(SkipB), 3, [1])
    return tuple(_o(x) for x in (F, G, NL, Res, Skip))


_add("wavenet1", "wavenet.tc", "wavenet1", _wavenet_in, _wavenet_ref,
     ({"B": 1, "RESIDUAL_C": 1, "RECEPTIVE_FIELD": 1, "DILATION_C": 1, "SKIP_C": 1, "DILATION_FACTOR": 1},
      {"B": 2, "RESIDUAL_C": 3, "RECEPTIVE_FIELD": 9, "DILATION_C": 4, "SKIP_C": 5, "DILATION_FACTOR": 2},
      {"B": 3, "RESIDUAL_C": 8, "RECEPTIVE_FIELD": 16, "DILATION_C": 6, "SKIP_C": 7, "DILATION_FACTOR": 4},
      {"B": 1, "RESIDUAL_C": 2, "RECEPTIVE_FIELD": 3, "DILATION_C": 2, "SKIP_C": 2, "DILATION_FACTOR": 5}),
     rtol=1e-4, atol=1e-5,
     tags=("benchmark", "where", "ternary", "guarded-read", "builtin", "multi-output"))

_add("tmm", "tmm.tc", "tmm",
     lambda rng, M, K, N: [_rn(rng, M, K), _rn(rng, N, K)],
     lambda A, B: (_o(_d(A) @ _d(B).T),),
     ({"M": 1, "K": 1, "N": 1}, {"M": 5, "K": 9, "N": 3}, {"M": 32, "K": 25, "N": 12}),
     atol=1e-4, tags=("reduction", "benchmark"))
_add("bench_batch_matmul", "bench_batchmatmul.tc", "batch_matmul",
     lambda rng, B, N, M, K: [_rn(rng, B, N, M), _rn(rng, B, M, K)],
     lambda X, Y: (_o(np.einsum("bnm,bmk->bnk", _d(X), _d(Y))),),
     ({"B": 1, "N": 1, "M": 1, "K": 1}, {"B": 5, "N": 3, "M": 7, "K": 2}),
     tags=("reduction", "benchmark"))
_add("bench_convolution", "bench_convolution.tc", "convolution",
     lambda rng, N, C, H, W, F, KH, KW: [_rn(rng, N, C, H, W), _rn(rng, F, C, KH, KW), _rn(rng, F)],
     _conv_bias_ref(1, 1),
     ({"N": 1, "C": 1, "H": 1, "W": 1, "F": 1, "KH": 1, "KW": 1},
      {"N": 2, "C": 3, "H": 8, "W": 7, "F": 5, "KH": 3, "KW": 3}),
     atol=1e-4, tags=("reduction", "benchmark", "conv"))
_add("bench_group_convolution", "bench_convolution.tc", "group_convolution",
     _gconv_inputs, _gconv_ref(1, 1), _GCONV_SIZES, atol=1e-4,
     tags=("reduction", "benchmark", "conv"))

_add("_1LUT", "mlp.tc", "_1LUT",
     lambda rng, E1, D, B, L1: [_rn(rng, E1, D), _ri(rng, 0, E1, B, L1)],
     lambda LUT1, I1: (_o(_lut_sum(LUT1, I1)),),
     ({"E1": 1, "D": 1, "B": 1, "L1": 1}, {"E1": 50, "D": 16, "B": 8, "L1": 20}),
     tags=("indirect", "reduction", "benchmark"))
_add("_2LUT", "mlp.tc", "_2LUT",
     lambda rng, E1, E2, D, B, L1, L2: [_rn(rng, E1, D), _ri(rng, 0, E1, B, L1),
                                        _rn(rng, E2, D), _ri(rng, 0, E2, B, L2)],
     lambda LUT1, I1, LUT2, I2: (_o(_lut_sum(LUT1, I1)), _o(_lut_sum(LUT2, I2))),
     ({"E1": 1, "E2": 2, "D": 1, "B": 1, "L1": 1, "L2": 3},
      {"E1": 30, "E2": 17, "D": 6, "B": 4, "L1": 7, "L2": 11}),
     tags=("indirect", "reduction", "benchmark", "multi-output"))
_add("_C3", "mlp.tc", "_C3",
     lambda rng, B, WX, WY: [_rn(rng, B, WX), _rn(rng, WY, WX)],
     lambda I, W: (_o(_d(I) @ _d(W).T),),
     ({"B": 1, "WX": 1, "WY": 1}, {"B": 6, "WX": 19, "WY": 4}),
     atol=1e-4, tags=("reduction", "benchmark"))
_add("mlp1", "mlp.tc", "mlp1",
     lambda rng, B, M, N: [_rn(rng, B, M), _rn(rng, M, N), _rn(rng, N)],
     lambda I, W1, B1: (_o(_relu(_d(I) @ _d(W1) + _d(B1))),),
     ({"B": 1, "M": 1, "N": 1}, {"B": 7, "M": 12, "N": 5}),
     atol=1e-4, tags=("reduction", "benchmark", "builtin"))
_add("mlp3", "mlp.tc", "mlp3",
     lambda rng, B, N, O, P, Q: [_rn(rng, B, N), _un(rng, -0.5, 0.5, O, N), _rn(rng, O),
                                 _un(rng, -0.5, 0.5, P, O), _rn(rng, P),
                                 _un(rng, -0.5, 0.5, Q, P), _rn(rng, Q)],
     _fc_ref,
     ({"B": 1, "N": 1, "O": 1, "P": 1, "Q": 1}, {"B": 5, "N": 9, "O": 7, "P": 6, "Q": 3}),
     atol=1e-4, tags=("reduction", "benchmark", "builtin", "multi-output"))


# ==========================================================================
# tc/examples
# ==========================================================================

_add("tensordot", "tensordot.tc", "tensordot",
     lambda rng, N, C1, C2, C3, H, W: [_rn(rng, N, C1, C2, H, W), _rn(rng, N, C2, C3, H, W)],
     lambda I0, I1: (_o(np.einsum("nabhw,nbchw->nachw", _d(I0), _d(I1))),),
     ({"N": 1, "C1": 1, "C2": 1, "C3": 1, "H": 1, "W": 1},
      {"N": 2, "C1": 3, "C2": 4, "C3": 5, "H": 3, "W": 2},
      {"N": 3, "C1": 2, "C2": 7, "C3": 3, "H": 5, "W": 4}),
     tags=("reduction", "example"))
_add("blockdiagperm2dfissioned_1", "blockdiagperm.tc", "blockdiagperm2dfissioned_1",
     lambda rng, B, K, NBYK: [_rn(rng, B, K, NBYK), _rn(rng, K, NBYK, NBYK)],
     lambda I, W: (_o(np.einsum("bkr,krn->bkn", _d(I), _d(W))),),
     ({"B": 1, "K": 1, "NBYK": 1}, {"B": 3, "K": 4, "NBYK": 5}, {"B": 8, "K": 2, "NBYK": 9}),
     tags=("reduction", "example"))
_add("blockdiagperm2dfissioned_2", "blockdiagperm.tc", "blockdiagperm2dfissioned_2",
     lambda rng, B, N: [_rn(rng, B, N), np.asarray(rng.permutation(N), dtype=I32)],
     lambda I, Idx: (_o(_d(I)[:, np.asarray(Idx)]),),
     ({"B": 1, "N": 1}, {"B": 3, "N": 7}, {"B": 5, "N": 16}),
     tags=("indirect", "where", "example"))


def _gn_example_ref(I, gamma, beta):
    Id = _d(I)
    cnt = Id.shape[2] * Id.shape[3] * Id.shape[4]
    sc = 1.0 / cnt
    s = Id.sum(axis=(2, 3, 4))
    ss = (Id * Id).sum(axis=(2, 3, 4))
    rstd = _rsqrt(ss * sc - s * s * sc * sc + 1e-5)
    return (_o(_gn_apply(I, gamma, beta, s * sc, rstd)), _o(s), _o(ss))


_add("group_normalization_example", "group_normalization_example.tc",
     "group_normalization", _gn_in, _gn_example_ref, _GN_SIZES,
     rtol=1e-3, atol=1e-3, tags=("example", "reduction", "builtin", "norm", "multi-output"))


# ==========================================================================
# test/cuda/test_compile_and_run.cc
# ==========================================================================

_SM_SIZES = ({"N": 1, "D": 1}, {"N": 4, "D": 7}, {"N": 9, "D": 32})


def _softmax_tmp_ref(I):
    I = _d(I)
    tmp = np.maximum(0.0, I.max(1))      # `max=` without `!` combines with the zero start
    O = np.exp(I - tmp[:, None])
    tmp = O.sum(1)
    return (_o(O / tmp[:, None]), _o(tmp))


def _softmax_parts(I):
    I = _d(I)
    mx = I.max(1)
    e = np.exp(I - mx[:, None])
    s = e.sum(1)
    return e / s[:, None], mx, e, s


_add("softmax_tmp", "compile_and_run.tc", "softmax_tmp", lambda rng, N, D: [_rn(rng, N, D)],
     _softmax_tmp_ref, _SM_SIZES + ({"N": 2, "D": 3},),
     tags=("reduction", "builtin", "no-bang", "multi-output"))
_add("softmax_fused", "compile_and_run.tc", "softmax_fused", lambda rng, N, D: [_rn(rng, N, D)],
     lambda I: (lambda O, mx, e, s: (_o(O), _o(s), _o(mx)))(*_softmax_parts(I)),
     _SM_SIZES, tags=("reduction", "builtin", "multi-output"))
_add("softmax_expdist", "compile_and_run.tc", "softmax_expdist", lambda rng, N, D: [_rn(rng, N, D)],
     lambda I: (lambda O, mx, e, s: (_o(O), _o(mx), _o(e), _o(s)))(*_softmax_parts(I)),
     _SM_SIZES, tags=("reduction", "builtin", "multi-output"))
_add("concat", "compile_and_run.tc", "concat",
     lambda rng, M, N: [_rn(rng, M, N), _rn(rng, M, N)],
     lambda A, B: (_o(np.stack([_d(A).T, _d(B).T], axis=1)),),
     ({"M": 1, "N": 1}, {"M": 3, "N": 5}, {"M": 8, "N": 2}),
     tags=("where", "ternary"))
_add("indexing", "compile_and_run.tc", "indexing",
     lambda rng, H, W, L: [_rn(rng, H, W), _ri(rng, 0, H, L)],
     lambda inp, index: (_o(_d(inp)[np.asarray(index)[:2]]),),
     ({"H": 1, "W": 1, "L": 2}, {"H": 5, "W": 4, "L": 3}, {"H": 9, "W": 7, "L": 6}),
     tags=("indirect", "where"))
_add("car_matmul", "compile_and_run.tc", "matmul",
     lambda rng, M, N, K: [_rn(rng, M, N), _rn(rng, N, K)],
     lambda A, B: (_o(_d(A) @ _d(B)),),
     ({"M": 1, "N": 1, "K": 1}, {"M": 3, "N": 4, "K": 5}),
     tags=("reduction",))
_add("matmul_acc", "compile_and_run.tc", "matmul_acc",
     lambda rng, M, N, K: [_rn(rng, M, N), _rn(rng, N, K)],
     lambda A, B: (_o(_d(A) @ _d(B)),),
     ({"M": 1, "N": 1, "K": 1}, {"M": 3, "N": 4, "K": 5}, {"M": 10, "N": 13, "K": 6}),
     tags=("reduction", "no-bang"))


def _conv_tmp_ref(I, W1, B):
    tmp = _conv(I, W1)
    return (_o(tmp), _o(tmp + _bc(_d(B), 4, [1])))


_CONVO_SIZES = tuple({("O" if k == "M" else k): v for k, v in s.items()} for s in _CONV_SIZES)


def _conv_inputs_o(rng, N, C, H, W, O, KH, KW):
    return [_rn(rng, N, C, H, W), _rn(rng, O, C, KH, KW), _rn(rng, O)]


_add("car_convolution", "compile_and_run.tc", "convolution", _conv_inputs_o, _conv_tmp_ref, _CONVO_SIZES, atol=1e-4,
     tags=("reduction", "conv", "multi-output", "degenerate-reduction"))
_add("convolutionStrided", "compile_and_run.tc", "convolutionStrided", _conv_inputs_o,
     _conv_bias_ref(2, 2), _CONVO_SIZES, atol=1e-4, tags=("reduction", "conv", "strided"))
_add("cast", "compile_and_run.tc", "cast",
     # fractional parts kept in [0.1, 0.9] and sums non-negative, so the float->int32
     # conversion is the same whether it truncates or floors
     lambda rng, M, N: [np.asarray(rng.integers(0, 5, (M, N)) + rng.uniform(0.1, 0.9, (M, N)), F32),
                        np.array(rng.integers(0, 5), I32)],
     lambda A, four: (_o(np.floor(_d(A) + int(four)), I32),),
     ({"M": 1, "N": 1}, {"M": 2, "N": 4}, {"M": 7, "N": 5}),
     tags=("cast", "int", "typed-output", "scalar"))

_TYPES = (("uint8", np.uint8), ("uint16", np.uint16), ("uint32", np.uint32),
          ("uint64", np.uint64), ("int8", np.int8), ("int16", np.int16),
          ("int32", np.int32), ("int64", np.int64), ("float32", np.float32),
          ("float64", np.float64), ("float", np.float32), ("double", np.float64))
for _tn, _dt in _TYPES:
    _signed = not np.issubdtype(_dt, np.unsignedinteger)
    _add(f"test_type_{_tn}", "types.tc", f"test_type_{_tn}",
         (lambda dt, sg: lambda rng, N: [np.asarray(rng.integers(-3 if sg else 0, 4 if sg else 6, N), dtype=dt)])(_dt, _signed),
         (lambda dt: lambda A: (_o(np.array([np.asarray(A).astype(np.int64).sum()]), dt),))(_dt),
         ({"N": 1}, {"N": 7}, {"N": 20}),
         rtol=0, atol=0,
         tags=("types", "where", "reduction") + (("int",) if np.issubdtype(_dt, np.integer) else ()))


# ==========================================================================
# test/cuda/test_tc_mapper.cc, test_tc_mapper_bugs.cc
# ==========================================================================

_add("batch_triple_hadamard", "tc_mapper.tc", "batch_triple_hadamard",
     lambda rng, B, D: [_rn(rng, B, D), _rn(rng, B, D), _rn(rng, B, D)],
     lambda U, V, W: (_o(_d(U) * _d(V) * _d(W)),),
     ({"B": 1, "D": 1}, {"B": 5, "D": 6}, {"B": 17, "D": 31}), tags=("pointwise",))
_add("tensoraddstrided", "tc_mapper.tc", "tensoraddstrided",
     lambda rng, N, M: [_rn(rng, N, M), _rn(rng, N, M)],
     lambda A, B: (_o(_d(A) + _d(B)),),
     ({"N": 1, "M": 1}, {"N": 4, "M": 9}), tags=("pointwise", "no-bang"))
_add("lut_reduce", "tc_mapper.tc", "lut_reduce",
     lambda rng, B, R, N: [_rn(rng, B, R), _ri(rng, 0, B, B, N)],
     lambda LUT, I: (_o(_d(LUT).sum(1)[np.asarray(I)]),),
     ({"B": 1, "R": 1, "N": 1}, {"B": 5, "R": 7, "N": 3}, {"B": 9, "R": 16, "N": 12}),
     atol=1e-4, tags=("indirect", "reduction"))
_add("spatial_batch_norm", "tc_mapper.tc", "spatial_batch_norm",
     lambda rng, N, C, H, W: [np.array([0.1], F32), np.array([1e-5], F32),
                              _rn(rng, N, C, H, W), _rn(rng, C), _un(rng, 0.5, 2.0, C)],
     _bn_ref, _BN_SIZES, rtol=1e-3, atol=1e-4,
     tags=("reduction", "multi-output", "norm"))


def _layernorm_ref(I):
    I = _d(I)
    C = I.shape[2]
    mean = I.sum(2) / C
    centered = I - mean[:, :, None]
    var = (centered * centered).sum(2) / C
    O = centered * np.sqrt(var)[:, :, None]          # = centered / rsqrt(var)
    return (_o(O), _o(mean), _o(centered), _o(var))


_add("layernorm", "tc_mapper_bugs.tc", "layernorm", lambda rng, T, B, C: [_rn(rng, T, B, C)],
     _layernorm_ref, ({"T": 1, "B": 1, "C": 1}, {"T": 3, "B": 4, "C": 8}, {"T": 5, "B": 2, "C": 31}),
     rtol=1e-3, atol=1e-4, tags=("reduction", "builtin", "norm", "multi-output"))


def _graph2_ref(I, J, W1):
    I, J, W1 = _d(I), _d(J), _d(W1)
    O = _conv(J.reshape(-1, 1, *J.shape[2:]), W1[None, None]).reshape(
        J.shape[0], J.shape[1], J.shape[2] - W1.shape[0] + 1, J.shape[3] - W1.shape[1] + 1)
    h = min(I.shape[2], O.shape[2])
    w = min(I.shape[3], O.shape[3])
    Out = np.einsum("nahw,nbhw->ab", I[:, :, :h, :w], O[:, :, :h, :w])
    return (_o(O), _o(Out))


_add("graph2", "tc_mapper_bugs.tc", "graph2",
     lambda rng, N, C, H, W, R, T, KH, KW: [_rn(rng, N, C, H, W), _rn(rng, N, C, R, T), _rn(rng, KH, KW)],
     _graph2_ref,
     ({"N": 1, "C": 1, "H": 1, "W": 1, "R": 1, "T": 1, "KH": 1, "KW": 1},
      {"N": 2, "C": 3, "H": 5, "W": 6, "R": 7, "T": 8, "KH": 3, "KW": 3},     # I and O agree
      {"N": 2, "C": 2, "H": 7, "W": 3, "R": 6, "T": 9, "KH": 2, "KW": 4},     # I wider in h, O in w
      {"N": 1, "C": 4, "H": 2, "W": 9, "R": 8, "T": 5, "KH": 1, "KW": 2}),
     atol=1e-4, tags=("reduction", "conv", "range-inference", "multi-output"))


def _conv1d_ref(A, K):
    A, K = _d(A), _d(K)
    X, Xp = A.shape[0], K.shape[0]
    B = np.array([sum(A[xp] * K[X - 1 + x - xp] for xp in range(X)) for x in range(Xp - X + 1)])
    return (_o(B),)


_add("convolution1d", "tc_mapper_bugs.tc", "convolution1d",
     lambda rng, X, Xp: [_rn(rng, X), _rn(rng, Xp)], _conv1d_ref,
     ({"X": 1, "Xp": 1}, {"X": 3, "Xp": 8}, {"X": 5, "Xp": 5}, {"X": 7, "Xp": 30}),
     atol=1e-5, tags=("reduction", "where", "range-inference"))


def _gn_centered_in(rng, N, G, D, H, W):
    I = _rn(rng, N, G, D, H, W)
    I = (I - I.mean(axis=(2, 3, 4), keepdims=True)).astype(F32)
    return [I, _un(rng, 0.5, 1.5, G, D), _rn(rng, G, D)]


def _group_norm_bugs_ref(I, gamma, beta):
    Id = _d(I)
    s = Id.sum(axis=(2, 3, 4))
    ss = (Id * Id).sum(axis=(2, 3, 4))
    rstd = _rsqrt(ss * 1.0 - s * s * 1.0 * 1.0 + 1e-5)
    return (_o(_gn_apply(I, gamma, beta, s * 1.0, rstd)), _o(s), _o(ss))


_add("group_norm", "tc_mapper_bugs.tc", "group_norm", _gn_centered_in, _group_norm_bugs_ref,
     _GN_SIZES, rtol=1e-3, atol=1e-3, tags=("reduction", "builtin", "norm", "multi-output"))


# ==========================================================================
# test/test_cuda_mapper.cc
# ==========================================================================

_add("add", "cuda_mapper.tc", "add", lambda rng, N, M: [_rn(rng, N, M), _rn(rng, N, M)],
     lambda A, B: (_o(_d(A) + _d(B)),), ({"N": 1, "M": 1}, {"N": 3, "M": 10}),
     tags=("pointwise",))
_add("fused_reduce", "cuda_mapper.tc", "fused_reduce",
     lambda rng, N: [_rn(rng, N, N, N, N), _rn(rng, N, N), _rn(rng, N, N), _rn(rng, N, N)],
     lambda A, B, C, D: (lambda O1, O2: (_o(O1), _o(O2), _o(O1 + O2)))(
         _d(A).sum((2, 3)) * _d(B), _d(C) * _d(D)),
     ({"N": 1}, {"N": 3}, {"N": 8}), atol=1e-4, tags=("reduction", "multi-output"))
_add("index_values", "cuda_mapper.tc", "index_values", lambda rng, N: [_rn(rng, N, N)],
     lambda A: (_o(_d(A) + np.arange(A.shape[0])[:, None] + np.arange(A.shape[0])[None, :] + A.shape[0]),),
     ({"N": 1}, {"N": 5}), tags=("index-value", "size-value"))


def _nextafter_ref(A, B, C):
    # nextafter is a float32 operation (one ulp towards exp(A)); it is computed in float32 here
    na = np.nextafter(np.asarray(C, F32)[:, None], np.exp(_d(A)).astype(F32))
    return (_o(_d(na) + np.log(_d(B).T)),)


_add("builtins", "cuda_mapper.tc", "builtins",
     lambda rng, N: [_rn(rng, N, N), _un(rng, 0.5, 3.0, N, N), _rn(rng, N)], _nextafter_ref,
     ({"N": 1}, {"N": 6}), tags=("builtin",))
_add("const_zero", "cuda_mapper.tc", "const_zero", lambda rng: [],
     lambda: (np.array(0, I32),), ({},), rtol=0, atol=0,
     tags=("scalar", "no-inputs", "int"))
_add("const_zero_unused_input", "cuda_mapper.tc", "const_zero_unused_input",
     lambda rng, N: [_rn(rng, N)], lambda I: (np.array(0, I32),), ({"N": 1}, {"N": 4}),
     rtol=0, atol=0, tags=("scalar", "int"))
_add("two_outputs_ranks", "cuda_mapper.tc", "two_outputs_ranks",
     lambda rng, N: [_rn(rng, N), _rn(rng, N, N)], lambda I1, I2: (_o(I1), _o(I2)),
     ({"N": 1}, {"N": 5}), tags=("copy", "multi-output"))
_add("two_copies", "cuda_mapper.tc", "two_copies",
     lambda rng, N, M: [_rn(rng, N, M), _rn(rng, N, M)], lambda A, B: (_o(A), _o(B)),
     ({"N": 1, "M": 1}, {"N": 4, "M": 3}), tags=("copy", "multi-output"))
_add("two_matmuls", "cuda_mapper.tc", "two_matmuls",
     lambda rng, M, K, N: [_rn(rng, M, K), _rn(rng, K, N), _rn(rng, K, N)],
     lambda A, B, C: (_o(_d(A) @ _d(B)), _o(_d(A) @ _d(C))),
     ({"M": 1, "K": 1, "N": 1}, {"M": 4, "K": 6, "N": 5}), tags=("reduction", "multi-output"))
_add("scalar_reduce", "cuda_mapper.tc", "scalar_reduce", lambda rng, N: [_rn(rng, N)],
     lambda I: (_o(_d(I).sum()),), ({"N": 1}, {"N": 17}, {"N": 300}), atol=1e-4,
     tags=("reduction", "scalar"))
_add("row_mean", "cuda_mapper.tc", "row_mean", lambda rng, N, K: [_rn(rng, N, K)],
     lambda I: (_o(_d(I).mean(1)),), ({"N": 1, "K": 1}, {"N": 6, "K": 11}),
     tags=("reduction",))
_add("init_then_acc", "cuda_mapper.tc", "init_then_acc",
     lambda rng, N, K: [_rn(rng, N, K), _rn(rng, N)],
     lambda I, O0: (_o(_d(O0) + _d(I).sum(1)),), ({"N": 1, "K": 1}, {"N": 6, "K": 11}),
     tags=("reduction", "no-bang", "where"))
_add("init_then_acc_mean", "cuda_mapper.tc", "init_then_acc_mean",
     lambda rng, N, K: [_rn(rng, N, K), _rn(rng, N)],
     lambda I, O0: (_o((_d(O0) + _d(I).sum(1)) / I.shape[1]),), ({"N": 1, "K": 1}, {"N": 6, "K": 11}),
     tags=("reduction", "no-bang", "where"))
_add("const_size_mean", "cuda_mapper.tc", "const_size_mean", lambda rng: [_rn(rng, 36, 1024)],
     lambda I: (_o(_d(I).sum(1) / 1024),), ({},), tags=("reduction", "const-size"))
_add("shiftedLut", "cuda_mapper.tc", "shiftedLut",
     lambda rng, E, D, B, L: [_rn(rng, E, D), _ri(rng, 0, E - 1, B, L)],
     lambda LUT, I: (_o(_lut_sum(LUT, np.asarray(I) + 1)),),
     ({"E": 2, "D": 1, "B": 1, "L": 1}, {"E": 9, "D": 4, "B": 3, "L": 5}),
     tags=("indirect", "reduction"))


def _shifted_lut2_ref(LUT, I):
    LUT, I = _d(LUT), np.asarray(I)
    D = LUT.shape[1]
    j = np.arange(D)
    return (_o(LUT[1 + j[None, None, :] + I[:, :, None], j[None, None, :]].sum(1)),)


_add("shiftedLut2", "cuda_mapper.tc", "shiftedLut2",
     lambda rng, E, D, B, L: [_rn(rng, E, D), _ri(rng, 0, E - D, B, L)], _shifted_lut2_ref,
     ({"E": 2, "D": 1, "B": 1, "L": 1}, {"E": 12, "D": 4, "B": 3, "L": 5}),
     tags=("indirect", "reduction"))


def _perforated_ref(inp, weights, index):
    inp, weights, index = _d(inp), _d(weights), np.asarray(index)
    N, L = index.shape
    M, C, KH, KW = weights.shape
    out = np.zeros((N, M, L))
    for n in range(N):
        for l in range(L):
            p = index[n, l]
            out[n, :, l] = np.einsum("chw,mchw->m", inp[n, :, p:p + KH, p:p + KW], weights)
    return (_o(out),)


_add("perforatedConvolution", "cuda_mapper.tc", "perforatedConvolution",
     lambda rng, N, C, H, W, M, KH, KW, L: [
         _rn(rng, N, C, H, W), _rn(rng, M, C, KH, KW),
         _ri(rng, 0, min(H - KH, W - KW) + 1, N, L)],
     _perforated_ref,
     ({"N": 1, "C": 1, "H": 1, "W": 1, "M": 1, "KH": 1, "KW": 1, "L": 1},
      {"N": 2, "C": 3, "H": 7, "W": 6, "M": 4, "KH": 2, "KW": 3, "L": 5}),
     atol=1e-4, tags=("indirect", "reduction", "where", "conv"))
_add("mod_index", "cuda_mapper.tc", "mod_index", lambda rng, N: [_rn(rng, N)],
     lambda a: (_o(_d(a)[np.arange(a.shape[0]) % 3]),), ({"N": 3}, {"N": 10}),
     tags=("where", "int", "mod"))


def _local_sparse_ref(I, W1):
    I, W1 = _d(I), _d(W1)
    N, C, H, W = I.shape
    O, KC, KH, KW = W1.shape
    out = 0.0
    for c in range(1, C):
        Isel = I[:, np.arange(KC) % c]                 # I(n, kc % c, ...)
        out = out + _conv(Isel, W1)
    return (_o(out),)


_add("local_sparse_convolution", "cuda_mapper.tc", "local_sparse_convolution",
     lambda rng, N, C, H, W, O, KC, KH, KW: [_rn(rng, N, C, H, W), _rn(rng, O, KC, KH, KW)],
     _local_sparse_ref,
     ({"N": 1, "C": 2, "H": 1, "W": 1, "O": 1, "KC": 1, "KH": 1, "KW": 1},
      {"N": 2, "C": 4, "H": 5, "W": 6, "O": 3, "KC": 5, "KH": 2, "KW": 3}),
     atol=1e-4, tags=("reduction", "where", "int", "mod", "conv"))


# ==========================================================================
# test/test_cuda_mapper_memory_promotion.cc, test_mapper_llvm.cc, test_core.cc
# ==========================================================================

_add("add4d", "memory_promotion.tc", "add4d",
     lambda rng, N, M, K, L: [_rn(rng, N, M, K, L), _rn(rng, N, M, K, L)],
     lambda A, B: (_o(_d(A) + _d(B)),),
     ({"N": 1, "M": 1, "K": 1, "L": 1}, {"N": 2, "M": 3, "K": 4, "L": 5}), tags=("pointwise",))
_add("copy_transpose", "memory_promotion.tc", "copy_transpose", lambda rng, N, M: [_rn(rng, N, M)],
     lambda A: (_o(A), _o(np.asarray(A).T)), ({"N": 1, "M": 1}, {"N": 3, "M": 7}),
     tags=("copy", "multi-output"))
_add("matmul_add", "memory_promotion.tc", "matmul_add",
     lambda rng, N, K, M: [_rn(rng, N, K), _rn(rng, K, M), _rn(rng, N, M)],
     lambda A, B, C: (_o(_d(A) @ _d(B) + _d(C)),),
     ({"N": 1, "K": 1, "M": 1}, {"N": 5, "K": 8, "M": 3}), tags=("reduction",))
_add("strided_odd", "memory_promotion.tc", "strided_odd", lambda rng, N, M: [_rn(rng, N, M)],
     lambda I: (_o(np.asarray(I)[:, 1:2 * (I.shape[1] // 2):2].T),),
     ({"N": 1, "M": 2}, {"N": 3, "M": 7}, {"N": 4, "M": 10}),
     tags=("strided", "range-inference"))
_add("strided_5", "memory_promotion.tc", "strided_5", lambda rng, N, M: [_rn(rng, N, M)],
     lambda I: (_o(np.asarray(I)[:, ::5].T),),
     ({"N": 1, "M": 1}, {"N": 3, "M": 5}, {"N": 2, "M": 6}, {"N": 4, "M": 23}),
     tags=("strided", "range-inference"))
_add("reduce_mul_add", "mapper_llvm.tc", "reduce_mul_add",
     lambda rng, N, M, K, L: [_rn(rng, N, M, K, L), _rn(rng, N, M), _rn(rng, N, M), _rn(rng, N, M)],
     lambda A, B, C, D: (lambda O1, O2: (_o(O1), _o(O2), _o(O1 + O2)))(
         _d(A).sum((2, 3)) * _d(B), _d(C) * _d(D)),
     ({"N": 1, "M": 1, "K": 1, "L": 1}, {"N": 3, "M": 4, "K": 5, "L": 6}),
     atol=1e-4, tags=("reduction", "multi-output"))
_add("two_layer", "core.tc", "two_layer",
     lambda rng, M, K, N, P: [_rn(rng, M, K), _rn(rng, K, N), _rn(rng, N, P)],
     lambda I, W1, W2: (lambda O1: (_o(O1), _o(O1 @ _d(W2))))(_d(I) @ _d(W1)),
     ({"M": 1, "K": 1, "N": 1, "P": 1}, {"M": 4, "K": 6, "N": 5, "P": 3}),
     atol=1e-4, tags=("reduction", "multi-output"))
_add("conv_cfhw", "core.tc", "conv_cfhw",
     lambda rng, N, C, H, W, F, KH, KW: [_rn(rng, N, C, H, W), _rn(rng, C, F, KH, KW)],
     lambda I1, W1: (_o(_conv(I1, np.transpose(_d(W1), (1, 0, 2, 3)))),),
     ({"N": 1, "C": 1, "H": 1, "W": 1, "F": 1, "KH": 1, "KW": 1},
      {"N": 2, "C": 3, "H": 6, "W": 5, "F": 4, "KH": 3, "KW": 2}),
     atol=1e-4, tags=("reduction", "conv"))
_add("group_conv_gcf", "core.tc", "group_conv_gcf",
     lambda rng, N, G, C, H, W, F, KH, KW: [_rn(rng, N, G, C, H, W), _rn(rng, G, C, F, KH, KW)],
     lambda I1, W1: (_o(_group_conv(I1, np.transpose(_d(W1), (0, 2, 1, 3, 4)))),),
     _GCONV_SIZES, atol=1e-4, tags=("reduction", "conv"))
_add("reduce_2d", "core.tc", "reduce_2d", lambda rng, M, N: [_rn(rng, M, N)],
     lambda I: (_o(_d(I).sum(1)),), ({"M": 1, "N": 1}, {"M": 7, "N": 12}), tags=("reduction",))
_add("reduce_3d", "core.tc", "reduce_3d", lambda rng, M, N, P: [_rn(rng, M, N, P)],
     lambda I: (_o(_d(I).sum((1, 2))),), ({"M": 1, "N": 1, "P": 1}, {"M": 5, "N": 6, "P": 7}),
     atol=1e-4, tags=("reduction",))
_add("copy_chain3", "core.tc", "copy_chain3", lambda rng, M, N: [_rn(rng, M, N)],
     lambda I: (_o(I), _o(I), _o(I)), ({"M": 1, "N": 1}, {"M": 3, "N": 4}),
     tags=("copy", "multi-output"))
_add("reduce_then_copy", "core.tc", "reduce_then_copy", lambda rng, M, N: [_rn(rng, M, N)],
     lambda I: (_o(_d(I).sum(1)), _o(_d(I).sum(1))), ({"M": 1, "N": 1}, {"M": 3, "N": 4}),
     tags=("reduction", "multi-output"))
_add("copy_reduce_copy", "core.tc", "copy_reduce_copy", lambda rng, M, N: [_rn(rng, M, N)],
     lambda I: (_o(I), _o(_d(I).sum(1)), _o(_d(I).sum(1))), ({"M": 1, "N": 1}, {"M": 3, "N": 4}),
     tags=("reduction", "multi-output"))


# ==========================================================================
# test/cuda/test_corner_cases.cc
# ==========================================================================

def _scalar(x, dtype=F32):
    return np.array(x, dtype=dtype)


_add("e2", "corner_cases.tc", "e2", lambda rng: [_rn(rng, 1)], lambda a: (_o(a),), ({},),
     tags=("corner", "const-size"))
_add("e4", "corner_cases.tc", "e4", lambda rng: [_rn(rng)], lambda a: (_o(a),), ({},),
     tags=("corner", "scalar"))
_add("e6", "corner_cases.tc", "e6", lambda rng: [_rn(rng)],
     lambda a: (_o(np.full(10, float(a))),), ({},), tags=("corner", "scalar", "where"))
_add("e10", "corner_cases.tc", "e10", lambda rng: [_scalar(rng.integers(-50, 50), I32)],
     lambda a: (np.full(10, int(a), dtype=I32),), ({},), rtol=0, atol=0,
     tags=("corner", "scalar", "where", "int"))


def _two_scalars(rng):
    # values from a small set so that equality happens
    return [_scalar(rng.choice([0.25, 0.5, 0.75])), _scalar(rng.choice([0.25, 0.5, 0.75]))]


for _nm, _fn in (("le", np.less_equal), ("ge", np.greater_equal), ("eq", np.equal),
                 ("ne", np.not_equal), ("lt", np.less), ("gt", np.greater)):
    _add(f"e15_{_nm}", "corner_cases.tc", f"e15_{_nm}", _two_scalars,
         (lambda fn: lambda a, b: (_o([float(fn(float(a), float(b)))]),))(_fn), ({},),
         rtol=0, atol=0, tags=("corner", "scalar", "where", "compare"))
_add("e16_or", "corner_cases.tc", "e16_or", lambda rng: [_un(rng, 0, 1), _un(rng, 0, 1)],
     lambda a, b: (_o([float((not (float(a) < .5)) or float(b) > .5)]),), ({},),
     rtol=0, atol=0, tags=("corner", "scalar", "where", "logic"))
_add("e16_and", "corner_cases.tc", "e16_and", lambda rng: [_un(rng, 0, 1), _un(rng, 0, 1)],
     lambda a, b: (_o([float((not (float(a) < .5)) and float(b) > .5)]),), ({},),
     rtol=0, atol=0, tags=("corner", "scalar", "where", "logic"))
_add("e17", "corner_cases.tc", "e17", lambda rng: [_rn(rng, 1)], lambda a: (_o([4.0]),), ({},),
     tags=("corner", "exists"))
_add("e18", "corner_cases.tc", "e18", lambda rng: [_rn(rng, 1)], lambda a: (_o(2 * _d(a)),), ({},),
     tags=("corner", "let"))
_add("e21", "corner_cases.tc", "e21", lambda rng: [_rn(rng, 1), _rn(rng, 1)],
     lambda a, b: (_o(np.maximum(a, b)),), ({},), tags=("corner", "minmax"))
_add("e22", "corner_cases.tc", "e22", lambda rng: [_rn(rng, 1), _rn(rng, 1)],
     lambda a, b: (_o(np.minimum(a, b)),), ({},), tags=("corner", "minmax"))
_add("e23", "corner_cases.tc", "e23", lambda rng: [_rn(rng, 1), _rn(rng, 1), _rn(rng, 1)],
     lambda a, b, c: (_o(np.minimum(a, np.maximum(b, c))),), ({},), tags=("corner", "minmax"))
_add("e24", "corner_cases.tc", "e24", lambda rng: [_rn(rng, 1), _rn(rng, 1), _rn(rng, 1)],
     lambda a, b, c: (_o(np.minimum(_d(a), np.maximum(_d(b), _d(c))) + np.maximum(_d(b), _d(c))),),
     ({},), tags=("corner", "minmax", "layout"))


def _e26_inputs(rng):
    a = int(rng.integers(-20, 21))
    b = int(rng.choice([-7, -3, -2, 2, 3, 5]))
    return [_scalar(a, I32), _scalar(b, I32)]


_add("e26", "corner_cases.tc", "e26", _e26_inputs,
     lambda a, b: (np.array([np.mod(int(a), int(b))], dtype=I32),), ({},), rtol=0, atol=0,
     tags=("corner", "scalar", "int", "mod", "where"))


# ==========================================================================
# test/test_inference.cc
# ==========================================================================

_add("transpose2d", "inference.tc", "transpose2d", lambda rng, I_0, I_1: [_rn(rng, I_0, I_1)],
     lambda I: (_o(np.asarray(I).T),), ({"I_0": 1, "I_1": 1}, {"I_0": 3, "I_1": 8}),
     tags=("range-inference", "copy"))
_add("transpose4d", "inference.tc", "transpose4d",
     lambda rng, I_0, I_1, I_2, I_3: [_rn(rng, I_0, I_1, I_2, I_3)],
     lambda I: (_o(np.transpose(I, (1, 0, 3, 2))),),
     ({"I_0": 1, "I_1": 1, "I_2": 1, "I_3": 1}, {"I_0": 2, "I_1": 3, "I_2": 4, "I_3": 5}),
     tags=("range-inference", "copy"))
_add("scale1d", "inference.tc", "scale1d", lambda rng, I_0: [_rn(rng, I_0)],
     lambda I: (_o(np.asarray(I)[::123]),), ({"I_0": 1}, {"I_0": 123}, {"I_0": 124}, {"I_0": 300}),
     tags=("range-inference", "strided"))
_add("shift1d", "inference.tc", "shift1d", lambda rng, I_0: [_rn(rng, I_0)],
     # written for i in 1:I_0+1; the size runs from 0, O(0) stays 0
     lambda I: (_o(np.concatenate([[0.0], _d(I)])),), ({"I_0": 1}, {"I_0": 6}),
     tags=("range-inference", "spec-ext"))
_add("conv_tmp", "inference.tc", "conv_tmp", _conv_inputs, _conv_tmp_ref, _CONV_SIZES,
     atol=1e-4, tags=("range-inference", "reduction", "conv", "degenerate-reduction", "multi-output"))


def _padded_conv_ref(I, W1, B):
    I = _d(I)
    N, C, H, W = I.shape
    pad = np.zeros((N, C, H + 5, W + 7))       # written from (5, 7); sizes run from 0
    pad[:, :, 5:, 7:] = I
    return (_o(pad), _o(_conv(pad, W1, 2, 3)))


_add("padded_conv", "inference.tc", "padded_conv", _conv_inputs, _padded_conv_ref,
     ({"N": 1, "C": 1, "H": 1, "W": 1, "M": 1, "KH": 1, "KW": 1},
      {"N": 2, "C": 3, "H": 6, "W": 5, "M": 2, "KH": 3, "KW": 2},
      {"N": 1, "C": 2, "H": 9, "W": 4, "M": 3, "KH": 2, "KW": 3}),
     atol=1e-4, tags=("range-inference", "reduction", "conv", "strided", "spec-ext", "multi-output"))


def _weird_conv_ref(inp, weight):
    inp, weight = _d(inp), _d(weight)
    B, IP, H, W = inp.shape
    OP, _, KH, KW = weight.shape
    OW = (W - KW) // 2 + 1
    OH = (H - KH - 3 * ((W - KW) // 2)) // 2 + 1
    out = np.zeros((B, OP, OH, OW))
    for h in range(OH):
        for w in range(OW):
            patch = inp[:, :, 2 * h + 3 * w:2 * h + 3 * w + KH, 2 * w:2 * w + KW]
            out[:, :, h, w] = np.einsum("bihw,oihw->bo", patch, weight)
    return (_o(out),)


_add("weird_conv", "inference.tc", "weird_conv",
     lambda rng, B, IP, H, W, OP, KH, KW: [_rn(rng, B, IP, H, W), _rn(rng, OP, IP, KH, KW)],
     _weird_conv_ref,
     ({"B": 1, "IP": 1, "H": 1, "W": 1, "OP": 1, "KH": 1, "KW": 1},
      {"B": 2, "IP": 3, "H": 16, "W": 7, "OP": 2, "KH": 3, "KW": 2},
      {"B": 1, "IP": 2, "H": 12, "W": 5, "OP": 3, "KH": 2, "KW": 1}),
     atol=1e-4, tags=("range-inference", "reduction", "conv"))


def _tca_ref(I):
    I = _d(I)
    I0, I1, _ = I.shape
    return (_o(np.array([sum(I[j, i + j, :].sum() for j in range(I0)) for i in range(I1 - I0 + 1)])),)


_add("tca", "inference.tc", "tca", lambda rng, I_0, I_1, I_2: [_rn(rng, I_0, I_1, I_2)], _tca_ref,
     ({"I_0": 1, "I_1": 1, "I_2": 1}, {"I_0": 3, "I_1": 7, "I_2": 2}, {"I_0": 4, "I_1": 4, "I_2": 3}),
     atol=1e-5, tags=("range-inference", "reduction"))


def _tcf_o2(A, B):
    A, B = _d(A), _d(B)
    J, K, L = min(B.shape[0], A.shape[1]), min(B.shape[1], A.shape[2]), B.shape[2]
    return A.shape[0] * B[:J, :K, :L] + A.sum(0)[:J, :K][:, :, None]


def _tcf_o3(O2, C):
    C = _d(C)
    K, L, M = min(C.shape[0], O2.shape[1]), min(C.shape[1], O2.shape[2]), C.shape[2]
    return O2.shape[0] * C[:K, :L, :M] + O2.sum(0)[:K, :L][:, :, None]


def _tcf_ref(A, B, C):
    O2 = _tcf_o2(A, B)
    return (_o(O2), _o(_tcf_o3(O2, C)))


def _tcg_ref(A, B, C):
    A = _d(A)
    O1 = A.sum(2)
    Bd = _d(B)
    J = min(Bd.shape[0], O1.shape[1])
    O2 = O1.shape[0] * Bd[:J] + O1.sum(0)[:J][:, None, None]
    return (_o(O1), _o(O2), _o(_tcf_o3(O2, C)))


_TCF_SIZES = ({"A_0": 1, "A_1": 1, "A_2": 1, "B_0": 1, "B_1": 1, "B_2": 1, "C_0": 1, "C_1": 1, "C_2": 1},
              {"A_0": 2, "A_1": 3, "A_2": 4, "B_0": 5, "B_1": 2, "B_2": 3, "C_0": 1, "C_1": 4, "C_2": 2},
              {"A_0": 3, "A_1": 5, "A_2": 2, "B_0": 4, "B_1": 6, "B_2": 2, "C_0": 7, "C_1": 1, "C_2": 3})


def _abc_inputs(rng, **s):
    return [_rn(rng, s["A_0"], s["A_1"], s["A_2"]), _rn(rng, s["B_0"], s["B_1"], s["B_2"]),
            _rn(rng, s["C_0"], s["C_1"], s["C_2"])]


_add("tcf", "inference.tc", "tcf", _abc_inputs, _tcf_ref, _TCF_SIZES, atol=1e-4,
     tags=("range-inference", "reduction", "multi-output"))
_add("tcg", "inference.tc", "tcg", _abc_inputs, _tcg_ref, _TCF_SIZES, atol=1e-4,
     tags=("range-inference", "reduction", "multi-output"))


def _partial_copy_ref(I):
    I = _d(I)
    O = np.zeros((I.shape[0] - 1, I.shape[1]))
    O[3:] = I[3:I.shape[0] - 1]
    return (_o(O),)


_add("partial_copy", "inference.tc", "partial_copy", lambda rng, N, M: [_rn(rng, N, M)],
     _partial_copy_ref, ({"N": 5, "M": 1}, {"N": 9, "M": 4}),
     tags=("range-inference", "where", "spec-ext"))


def _rotate_ref(I):
    I = _d(I)
    N, M = I.shape
    jlo, jhi = max(0, 20 - N), min(10, M - 10)
    O = np.zeros((10, jhi + 1))
    for i in range(10):
        for j in range(jlo, jhi + 1):
            O[i, j] = I[10 + i - j, i + j]
    return (_o(O),)


_add("unambiguous_rotate", "inference.tc", "unambiguous_rotate", lambda rng, N, M: [_rn(rng, N, M)],
     _rotate_ref, ({"N": 20, "M": 20}, {"N": 25, "M": 23}, {"N": 15, "M": 18}),
     tags=("range-inference", "where", "spec-ext"))
_add("statically_provable", "inference.tc", "statically_provable", lambda rng: [_rn(rng, 10, 19, 10)],
     lambda I: (_o(np.array([[I[i, i + j, j] for j in range(10)] for i in range(10)])),), ({},),
     tags=("range-inference", "const-size"))


def _partial_assign_ref():
    O = np.zeros((8, 20), dtype=I32)
    O[4:8, 3:20] = 3
    return (O,)


_add("partial_assign_where", "inference.tc", "partial_assign_where", lambda rng: [],
     _partial_assign_ref, ({},), rtol=0, atol=0,
     tags=("range-inference", "where", "no-inputs", "int", "spec-ext"))


# ==========================================================================
# test/caffe2, python/tests
# ==========================================================================

_add("matmul_grad", "caffe2.tc", "matmul_grad",
     lambda rng, M, N, K: [_rn(rng, M, N), _rn(rng, N, K), _rn(rng, M, K)],
     lambda I, W, d_O: (_o(_d(d_O) @ _d(W).T), _o(_d(I).T @ _d(d_O))),
     ({"M": 1, "N": 1, "K": 1}, {"M": 4, "N": 3, "K": 5}, {"M": 9, "N": 11, "K": 2}),
     atol=1e-4, tags=("reduction", "multi-output"))
_add("gather", "caffe2.tc", "gather", lambda rng, N, A, B: [_rn(rng, N), _ri(rng, 0, N, A, B)],
     lambda X, I: (_o(np.asarray(X)[np.asarray(I)]),),
     ({"N": 1, "A": 1, "B": 1}, {"N": 10, "A": 3, "B": 4}), tags=("indirect",))
_add("sigmoid_equiv", "caffe2.tc", "sigmoid_equiv", lambda rng, B, N, M: [_rn(rng, B, N, M)],
     lambda X: (_o(_sigmoid(_d(X))),), ({"B": 1, "N": 1, "M": 1}, {"B": 2, "N": 3, "M": 4}),
     tags=("builtin", "equivalence"))
_add("py_add", "python_tests.tc", "add", lambda rng, N: [_rn(rng, N), _rn(rng, N)],
     lambda A, B: (_o(_d(A) + _d(B)),), ({"N": 1}, {"N": 100}), tags=("pointwise",))
_add("py_sub", "python_tests.tc", "sub", lambda rng, N: [_rn(rng, N), _rn(rng, N)],
     lambda A, B: (_o(_d(A) - _d(B)),), ({"N": 1}, {"N": 100}), tags=("pointwise",))


def _avgpool_ref(kh, kw, sh=1, sw=1):
    def ref(inp):
        inp = _d(inp)
        B, C, H, W = inp.shape
        OH, OW = (H - kh) // sh + 1, (W - kw) // sw + 1
        out = np.zeros((B, C, OH, OW))
        for a in range(kh):
            for b in range(kw):
                out += inp[:, :, a:a + sh * (OH - 1) + 1:sh, b:b + sw * (OW - 1) + 1:sw] / (kh * kw)
        return (_o(out),)
    return ref


_add("avgpool", "python_tests.tc", "avgpool", lambda rng, B, C, H, W: [_rn(rng, B, C, H, W)],
     _avgpool_ref(2, 2), ({"B": 1, "C": 1, "H": 2, "W": 2}, {"B": 1, "C": 1, "H": 4, "W": 4},
                          {"B": 2, "C": 3, "H": 7, "W": 6}),
     tags=("reduction", "where"))


def _gn_fused_ref(I, gamma, beta):
    Id = _d(I)
    cnt = Id.shape[2] * Id.shape[3] * Id.shape[4]
    s = Id.sum(axis=(2, 3, 4))
    ss = (Id * Id).sum(axis=(2, 3, 4))
    rstd = _rsqrt((ss - s * s / cnt) / cnt + 1e-5)
    return (_o(s), _o(ss), _o(_gn_apply(I, gamma, beta, s / cnt, rstd)))


_add("py_group_normalization", "python_tests.tc", "group_normalization", _gn_in, _gn_fused_ref,
     _GN_SIZES, rtol=1e-3, atol=1e-3, tags=("reduction", "builtin", "norm", "multi-output"))
_add("py_convolution", "python_tests.tc", "convolution", _conv_inputs, _conv_bias_ref(1, 1),
     _CONV_SIZES, atol=1e-4, tags=("reduction", "conv"))


def _igrad(W1, d_O):
    """d_I(n,c,h,w) = sum d_O(n,m,h-kh,w-kw) W1(m,c,kh,kw), over h in KH-1:H, w in KW-1:W;
    the rest of d_I stays 0 (its size runs from 0 to H, W)."""
    W1, d_O = _d(W1), _d(d_O)
    M, C, KH, KW = W1.shape
    N, _, H, W = d_O.shape
    d_I = np.zeros((N, C, H, W))
    for kh in range(KH):
        for kw in range(KW):
            d_I[:, :, KH - 1:, KW - 1:] += np.einsum(
                "nmhw,mc->nchw", d_O[:, :, KH - 1 - kh:H - kh, KW - 1 - kw:W - kw], W1[:, :, kh, kw])
    return d_I


def _wgrad(I, d_O):
    """d_W1(m,c,0,0) = sum d_O(n,m,h,w) I(n,c,h,w): kh and kw are inferred to 0:1"""
    return np.einsum("nmhw,nchw->mc", _d(d_O), _d(I))[:, :, None, None]


_GRAD_SIZES = ({"N": 1, "C": 1, "H": 1, "W": 1, "M": 1, "KH": 1, "KW": 1},
               {"N": 2, "C": 3, "H": 5, "W": 6, "M": 4, "KH": 1, "KW": 1},
               {"N": 2, "C": 2, "H": 6, "W": 5, "M": 3, "KH": 2, "KW": 3})
_add("convolution_grad", "python_tests.tc", "convolution_grad",
     lambda rng, N, C, H, W, M, KH, KW: [_rn(rng, N, C, H, W), _rn(rng, M, C, KH, KW),
                                         _rn(rng, M), _rn(rng, N, M, H, W)],
     lambda I, W1, Bias, d_O: (_o(_igrad(W1, d_O)), _o(_wgrad(I, d_O)), _o(Bias)),
     _GRAD_SIZES, atol=1e-4, tags=("reduction", "conv", "range-inference", "multi-output", "spec-ext"))
_add("convolution_igrad", "python_tests.tc", "convolution_igrad",
     lambda rng, N, C, H, W, M, KH, KW: [_rn(rng, M, C, KH, KW), _rn(rng, N, M, H, W)],
     lambda W1, d_O: (_o(_igrad(W1, d_O)),), _GRAD_SIZES, atol=1e-4,
     tags=("reduction", "conv", "range-inference", "spec-ext"))
_add("convolution_wgrad", "python_tests.tc", "convolution_wgrad",
     lambda rng, N, C, H, W, M: [_rn(rng, N, C, H, W), _rn(rng, N, M, H, W)],
     lambda I, d_O: (_o(_wgrad(I, d_O)),),
     tuple({k: s[k] for k in ("N", "C", "H", "W", "M")} for s in _GRAD_SIZES),
     atol=1e-4, tags=("reduction", "conv", "range-inference"))
_add("convolution_biasgrad", "python_tests.tc", "convolution_biasgrad",
     lambda rng, M: [_rn(rng, M)], lambda Bias: (_o(Bias),), ({"M": 1}, {"M": 5}), tags=("copy",))


# ==========================================================================
# python/examples/min_distance.py, masked_conv.py, tum.py
# ==========================================================================
# L holds small integers so every sum is exact in float32: the argmin
# statements compare floats with ==, and ties resolve to the smallest index.

def _codes(rng, N, M):
    return np.asarray(rng.integers(0, 256, (N, M)), dtype=np.uint8)


def _int_lut(rng, *shape):
    return np.asarray(rng.integers(-8, 9, shape), dtype=F32)


def _reduce_codes(L, Codes):
    L, Codes = _d(L), np.asarray(Codes).astype(np.int64)
    M = Codes.shape[1]
    if L.ndim == 2:
        return L[np.arange(M)[None, :], Codes].sum(1)                     # (N,)
    return L[:, np.arange(M)[None, :], Codes].sum(2)                      # (K, N)


def _argmin_first(S, axis=-1):
    return np.argmin(S, axis=axis).astype(I32)


def _mindis1_ref(L, Codes):
    S = _reduce_codes(L, Codes)
    return (_o(S), _o(S.min()), np.array(_argmin_first(S), dtype=I32))


_MD_SIZES = ({"M": 1, "N": 1}, {"M": 4, "N": 9}, {"M": 8, "N": 50})
_add("mindis", "min_distance_1.tc", "mindis",
     lambda rng, M, N: [_int_lut(rng, M, 256), _codes(rng, N, M)], _mindis1_ref, _MD_SIZES,
     rtol=0, atol=0, tags=("indirect", "cast", "uint8", "reduction", "min", "scalar",
                           "ternary", "const-size", "int", "multi-output"))
_add("md1_reduce_codes", "min_distance_1.tc", "reduce_codes",
     lambda rng, M, N: [_int_lut(rng, M, 256), _codes(rng, N, M)],
     lambda L, Codes: (_o(_reduce_codes(L, Codes)),), _MD_SIZES, rtol=0, atol=0,
     tags=("indirect", "cast", "uint8", "reduction", "const-size"))
_add("md1_min_2d", "min_distance_1.tc", "min_2d", lambda rng, N: [_int_lut(rng, N)],
     lambda S: (_o(_d(S).min()),), ({"N": 1}, {"N": 13}), rtol=0, atol=0,
     tags=("reduction", "min", "scalar"))
_add("md1_argmin_2d", "min_distance_1.tc", "argmin_2d",
     lambda rng, N: (lambda S: [S, np.array(S.min(), F32)])(_int_lut(rng, N)),
     lambda S, v: (np.array(_argmin_first(_d(S)), dtype=I32),), ({"N": 1}, {"N": 13}, {"N": 40}),
     rtol=0, atol=0, tags=("reduction", "min", "scalar", "ternary", "int"))


def _md2_argmin2d_ref(S, v):
    S = _d(S)
    D, NBYD = S.shape
    idx = np.where(S == float(v), np.arange(D)[:, None] * NBYD + np.arange(NBYD)[None, :], NBYD * D)
    return (idx.min(1).astype(I32),)


_add("md2_reduce_codes", "min_distance_2.tc", "reduce_codes",
     lambda rng, M, N: [_int_lut(rng, M, 256), _codes(rng, N, M)],
     lambda L, Codes: (_o(_reduce_codes(L, Codes)),), _MD_SIZES, rtol=0, atol=0,
     tags=("indirect", "cast", "uint8", "reduction", "const-size"))
_add("md2_min_2d", "min_distance_2.tc", "min_2d", lambda rng, D, NBYD: [_int_lut(rng, D, NBYD)],
     lambda S: (_o(_d(S).min(1)),), ({"D": 1, "NBYD": 1}, {"D": 4, "NBYD": 7}), rtol=0, atol=0,
     tags=("reduction", "min"))
_add("md2_min_1d", "min_distance_2.tc", "min_1d", lambda rng, D: [_int_lut(rng, D)],
     lambda V: (_o(_d(V).min()),), ({"D": 1}, {"D": 9}), rtol=0, atol=0,
     tags=("reduction", "min", "scalar"))
_add("md2_argmin_2d", "min_distance_2.tc", "argmin_2d",
     lambda rng, D, NBYD: (lambda S: [S, np.array(S.min(), F32)])(_int_lut(rng, D, NBYD)),
     _md2_argmin2d_ref, ({"D": 1, "NBYD": 1}, {"D": 4, "NBYD": 7}, {"D": 6, "NBYD": 3}),
     rtol=0, atol=0, tags=("reduction", "min", "scalar", "ternary", "int", "size-value"))


def _md2_argmin1d_inputs(rng, N, D):
    MinIdx = np.where(rng.uniform(size=D) < 0.5, N, rng.integers(0, N, D)).astype(I32)
    return [_rn(rng, N), MinIdx]


def _md2_argmin1d_ref(S, MinIdx):
    N = S.shape[0]
    MinIdx = np.asarray(MinIdx)
    return (np.array(np.where(MinIdx < N, np.arange(MinIdx.shape[0]), N).min(), dtype=I32),)


_add("md2_argmin_1d", "min_distance_2.tc", "argmin_1d", _md2_argmin1d_inputs, _md2_argmin1d_ref,
     ({"N": 1, "D": 1}, {"N": 10, "D": 5}, {"N": 3, "D": 8}), rtol=0, atol=0,
     tags=("reduction", "min", "scalar", "ternary", "int"))


def _mindis3_ref(L, Codes):
    S = _reduce_codes(L, Codes)
    return (_o(S), _o(S.min(1)), _argmin_first(S, 1))


_MD3_SIZES = ({"K": 1, "M": 1, "N": 1}, {"K": 3, "M": 4, "N": 9}, {"K": 2, "M": 5, "N": 30})
_add("mindis_k", "min_distance_3.tc", "mindis",
     lambda rng, K, M, N: [_int_lut(rng, K, M, 256), _codes(rng, N, M)], _mindis3_ref, _MD3_SIZES,
     rtol=0, atol=0, tags=("indirect", "cast", "uint8", "reduction", "min", "ternary",
                           "const-size", "int", "multi-output"))
_add("md4_reduce_codes", "min_distance_4.tc", "reduce_codes",
     lambda rng, K, M, N: [_int_lut(rng, K, M, 256), _codes(rng, N, M)],
     lambda L, Codes: (_o(_reduce_codes(L, Codes)),), _MD3_SIZES, rtol=0, atol=0,
     tags=("indirect", "cast", "uint8", "reduction", "const-size"))
_add("md4_min_2d", "min_distance_4.tc", "min_2d",
     lambda rng, K, D, NBYD: [_int_lut(rng, K, D, NBYD)], lambda S: (_o(_d(S).min(2)),),
     ({"K": 1, "D": 1, "NBYD": 1}, {"K": 2, "D": 3, "NBYD": 5}), rtol=0, atol=0,
     tags=("reduction", "min"))
_add("md4_min_1d", "min_distance_4.tc", "min_1d", lambda rng, K, D: [_int_lut(rng, K, D)],
     lambda V2: (_o(_d(V2).min(1)),), ({"K": 1, "D": 1}, {"K": 3, "D": 6}), rtol=0, atol=0,
     tags=("reduction", "min"))


def _md4_argmin2d_ref(S, V):
    S, V = _d(S), _d(V)
    K, D, NBYD = S.shape
    lin = np.arange(D)[:, None] * NBYD + np.arange(NBYD)[None, :]
    idx = np.where(S == V[:, None, None], lin[None], NBYD * D)
    return (idx.min(2).astype(I32),)


_add("md4_argmin_2d", "min_distance_4.tc", "argmin_2d",
     lambda rng, K, D, NBYD: (lambda S: [S, S.min(axis=(1, 2)).astype(F32)])(_int_lut(rng, K, D, NBYD)),
     _md4_argmin2d_ref, ({"K": 1, "D": 1, "NBYD": 1}, {"K": 2, "D": 4, "NBYD": 3}),
     rtol=0, atol=0, tags=("reduction", "min", "ternary", "int", "size-value"))


def _md4_argmin1d_inputs(rng, K, N, D):
    MinIdx2 = np.where(rng.uniform(size=(K, D)) < 0.5, N, rng.integers(0, N, (K, D))).astype(I32)
    return [_rn(rng, K, N), MinIdx2]


def _md4_argmin1d_ref(S, MinIdx2):
    N = S.shape[1]
    M2 = np.asarray(MinIdx2)
    return (np.where(M2 < N, np.arange(M2.shape[1])[None, :], N).min(1).astype(I32),)


_add("md4_argmin_1d", "min_distance_4.tc", "argmin_1d", _md4_argmin1d_inputs, _md4_argmin1d_ref,
     ({"K": 1, "N": 1, "D": 1}, {"K": 3, "N": 10, "D": 5}), rtol=0, atol=0,
     tags=("reduction", "min", "ternary", "int"))


def _masked_conv_ref(Input, Weights, Mask):
    W = _d(Weights) * (np.asarray(Mask) == 1)[:, :, None, None]
    return (_o(_conv(_relu(_d(Input)), W)),)


_add("masked_convolve", "masked_conv.tc", "masked_convolve",
     lambda rng, B, C, H, W, F, K: [_rn(rng, B, C, H, W), _rn(rng, F, C, K, K),
                                   np.asarray(rng.integers(0, 3, (F, C)), dtype=np.uint8)],
     _masked_conv_ref,
     ({"B": 1, "C": 1, "H": 1, "W": 1, "F": 1, "K": 1},
      {"B": 2, "C": 4, "H": 6, "W": 5, "F": 3, "K": 2},
      {"B": 1, "C": 3, "H": 8, "W": 8, "F": 2, "K": 3}),
     atol=1e-4, tags=("reduction", "conv", "ternary", "uint8", "builtin"))


# --- tum.py (lengths cosine coherence), pos_dist = 2, neg_dist = 0 ---------

def _segments(rng, K, MAX_L):
    return np.asarray(rng.integers(1, MAX_L + 1, K), dtype=I32)


def _tum_idx(Segments):
    Seg = np.asarray(Segments).astype(np.int64)
    return np.concatenate([[0], np.cumsum(Seg)]).astype(I32)


def _tum_alpha(Idx, MAX_L):
    Idx = np.asarray(Idx).astype(np.int64)
    K = Idx.shape[0] - 1
    l1 = np.arange(MAX_L)[:, None]
    l2 = np.arange(MAX_L)[None, :]
    X = np.where(np.abs(l1 - l2) <= 2, 1.0, -1.0)    # (2 == 0 || |d| <= 2) ? 1 : (0 == 0 && |d| >= 0) ? -1 : 0
    A = np.zeros((K, MAX_L, MAX_L))
    for k in range(K):
        Y = ((Idx[k] + l1 < Idx[k + 1]) & (Idx[k] + l2 < Idx[k + 1])).astype(float)
        A[k] = np.where(l1 >= l2, 0.0, X * Y)
    return A


def _tum_counts(Alpha):
    Alpha = _d(Alpha)
    MAX_L = Alpha.shape[1]
    upper = np.arange(MAX_L)[:, None] < np.arange(MAX_L)[None, :]
    tmpPos = (upper[None] & (Alpha > 0)).sum(2).astype(float)
    tmpNeg = (upper[None] & (Alpha < 0)).sum(2).astype(float)
    return tmpPos.sum(1), tmpNeg.sum(1), tmpPos, tmpNeg


def _tum_beta(Alpha, PosCount, NegCount):
    Alpha, P, Nn = _d(Alpha), _d(PosCount), _d(NegCount)
    MAX_L = Alpha.shape[1]
    upper = (np.arange(MAX_L)[:, None] < np.arange(MAX_L)[None, :])[None]
    with np.errstate(divide="ignore"):
        pos = np.where(Alpha == 1.0, 1.0 / P[:, None, None], 0.0)
        neg = np.where(Alpha == -1.0, -1.0 / Nn[:, None, None], 0.0)
    return np.where(upper, np.where(Alpha == 1.0, pos, neg), 0.0)


def _tum_normalize(Input):
    Input = _d(Input)
    sq = (Input * Input).sum(1)
    return Input / np.sqrt(sq + 1e-12)[:, None], sq


def _tum_dots(NormData, Idx, MAX_L):
    ND, Idx = _d(NormData), np.asarray(Idx).astype(np.int64)
    K = Idx.shape[0] - 1
    out = np.zeros((K, MAX_L, MAX_L))
    for k in range(K):
        for a in range(MAX_L):
            for b in range(a + 1, MAX_L):
                if Idx[k] + a < Idx[k + 1] and Idx[k] + b < Idx[k + 1]:
                    out[k, a, b] = ND[Idx[k] + a] @ ND[Idx[k] + b]
    return out


def _tum_result(Beta, Dots):
    MAX_L = Beta.shape[1]
    upper = (np.arange(MAX_L)[:, None] < np.arange(MAX_L)[None, :])[None]
    tmpO = np.where(upper, _d(Dots) * _d(Beta), 0.0).sum(2)
    return tmpO.sum(1), tmpO


_TUM_SIZES = ({"K": 1, "MAX_L": 1}, {"K": 3, "MAX_L": 4}, {"K": 4, "MAX_L": 6})


def _tum_stage_inputs(rng, K, MAX_L):
    Seg = _segments(rng, K, MAX_L)
    Idx = _tum_idx(Seg)
    Alpha = _tum_alpha(Idx, MAX_L)
    P, Nn, _, _ = _tum_counts(Alpha)
    Beta = _tum_beta(Alpha, P, Nn)
    return Seg, Idx, Alpha.astype(F32), P.astype(F32), Nn.astype(F32), Beta.astype(F32)


def _tum_meta(MAX_L):
    return np.ones(MAX_L, dtype=I32)


_add("make_idx", "tum.tc", "make_idx", lambda rng, K: [_segments(rng, K, 4)],
     lambda Seg: (_tum_idx(Seg),), ({"K": 1}, {"K": 5}, {"K": 12}), rtol=0, atol=0,
     tags=("int", "where", "ternary", "reduction", "tum"))
_add("make_alpha", "tum.tc", "make_alpha",
     lambda rng, KP1, MAX_L: [_tum_idx(_segments(rng, KP1 - 1, MAX_L)), _tum_meta(MAX_L)],
     lambda Idx, Meta: (_o(_tum_alpha(Idx, Meta.shape[0])),),
     tuple({"KP1": s["K"] + 1, "MAX_L": s["MAX_L"]} for s in _TUM_SIZES),
     rtol=0, atol=0, tags=("where", "ternary", "indirect", "builtin", "cast", "tum"))
_add("make_counts", "tum.tc", "make_counts",
     lambda rng, K, MAX_L: [_tum_stage_inputs(rng, K, MAX_L)[2], _tum_meta(MAX_L)],
     lambda Alpha, Meta: tuple(_o(x) for x in _tum_counts(Alpha)), _TUM_SIZES, rtol=0, atol=0,
     tags=("where", "ternary", "reduction", "multi-output", "tum"))
_add("make_beta", "tum.tc", "make_beta",
     lambda rng, K, MAX_L: (lambda st: [st[2], st[3], st[4], _tum_meta(MAX_L)])(
         _tum_stage_inputs(rng, K, MAX_L)),
     lambda Alpha, P, Nn, Meta: (_o(_tum_beta(Alpha, P, Nn)),), _TUM_SIZES,
     tags=("where", "ternary", "cast", "tum"))
_add("normalize", "tum.tc", "normalize", lambda rng, N, C: [_rn(rng, N, C)],
     lambda Input: (lambda nd, sq: (_o(nd), _o(sq)))(*_tum_normalize(Input)),
     ({"N": 1, "C": 1}, {"N": 7, "C": 16}), tags=("reduction", "builtin", "multi-output", "tum"))


def _tum_dots_inputs(rng, K, MAX_L, C):
    Seg, Idx, _, _, _, Beta = _tum_stage_inputs(rng, K, MAX_L)
    N = int(Idx[-1])
    ND, _ = _tum_normalize(_rn(rng, N, C))
    return [ND.astype(F32), Idx, Beta]


_add("dots", "tum.tc", "dots", _tum_dots_inputs,
     lambda ND, Idx, Beta: (_o(_tum_dots(ND, Idx, Beta.shape[1])),),
     tuple(dict(s, C=c) for s, c in zip(_TUM_SIZES, (1, 5, 8))),
     atol=1e-5, tags=("where", "ternary", "indirect", "guarded-read", "reduction", "tum"))


def _tum_result_inputs(rng, K, MAX_L):
    Seg, Idx, _, _, _, Beta = _tum_stage_inputs(rng, K, MAX_L)
    ND, _ = _tum_normalize(_rn(rng, int(Idx[-1]), 4))
    return [Beta, _tum_dots(ND, Idx, MAX_L).astype(F32)]


_add("result", "tum.tc", "result", _tum_result_inputs,
     lambda Beta, Dots: (lambda O, t: (_o(O), _o(t)))(*_tum_result(Beta, Dots)), _TUM_SIZES,
     tags=("ternary", "reduction", "multi-output", "tum"))


# ==========================================================================
# docs/source
# ==========================================================================

_add("copy2d", "docs.tc", "copy2d", lambda rng, M, N: [_rn(rng, M, N)], lambda I: (_o(I),),
     ({"M": 1, "N": 1}, {"M": 4, "N": 9}), tags=("copy", "docs"))


def _lu_ref(L, U):
    L, U = _d(L), _d(U)
    M, K = L.shape
    k = np.arange(K)
    mask = (k[None, :, None] >= np.arange(M)[:, None, None]) & (k[None, :, None] <= np.arange(M)[None, None, :])
    return (_o(np.einsum("ak,kb,akb->ab", L, U, mask)),)


_add("matmul_lu", "docs.tc", "matmul_lu", lambda rng, M, K: [_rn(rng, M, K), _rn(rng, K, M)], _lu_ref,
     ({"M": 1, "K": 1}, {"M": 5, "K": 5}, {"M": 6, "K": 3}, {"M": 3, "K": 8}),
     atol=1e-5, tags=("reduction", "ternary", "logic", "docs"))
_add("matmul_bw", "docs.tc", "matmul_bw",
     lambda rng, M, K, N: [_rn(rng, M, K), _rn(rng, K, N), _rn(rng, M, N)],
     lambda A, B, d_C: (_o(_d(d_C) @ _d(B).T), _o(_d(A).T @ _d(d_C))),
     ({"M": 1, "K": 1, "N": 1}, {"M": 4, "K": 6, "N": 5}), atol=1e-4,
     tags=("reduction", "multi-output", "docs"))
_add("docs_lut", "docs.tc", "lut", lambda rng, J, I: [_rn(rng, J), _ri(rng, 0, J, I)],
     lambda B, C: (_o(np.asarray(B)[np.asarray(C)]),), ({"J": 1, "I": 1}, {"J": 6, "I": 11}),
     tags=("indirect", "docs"))
_add("lut_clamped", "docs.tc", "lut_clamped", lambda rng, J, I: [_rn(rng, J), _ri(rng, -4, J + 4, I)],
     lambda B, C: (_o(np.asarray(B)[np.clip(np.asarray(C), 0, B.shape[0] - 1)]),),
     ({"J": 1, "I": 5}, {"J": 6, "I": 20}), tags=("indirect", "minmax", "int", "docs"))
_add("subsample_2", "docs.tc", "subsample_2", lambda rng, I: [_rn(rng, I)],
     lambda B: (_o(np.asarray(B)[::2]),), ({"I": 1}, {"I": 2}, {"I": 7}, {"I": 10}),
     tags=("strided", "range-inference", "docs"))
_add("average_pool_2", "docs.tc", "average_pool_2", lambda rng, I: [_rn(rng, I)],
     lambda B: (_o(_d(B)[0:2 * (B.shape[0] // 2):2] + _d(B)[1:2 * (B.shape[0] // 2):2]),),
     ({"I": 2}, {"I": 3}, {"I": 10}), tags=("strided", "range-inference", "docs"))
_add("constant_fill", "docs.tc", "constant_fill", lambda rng, N: [_rn(rng, N), _rn(rng)],
     lambda A, c: (_o(np.full(A.shape[0], float(c))),), ({"N": 1}, {"N": 9}),
     tags=("exists", "scalar", "docs"))
_add("mv", "docs.tc", "mv", lambda rng, R, C: [_rn(rng, R, C), _rn(rng, C)],
     lambda A, x: (_o(_d(A) @ _d(x)),), ({"R": 1, "C": 1}, {"R": 7, "C": 12}),
     atol=1e-5, tags=("reduction", "docs"))
_add("docs_conv", "docs.tc", "conv",
     lambda rng, B, IP, H, W, OP, KH, KW: [_rn(rng, B, IP, H, W), _rn(rng, OP, IP, KH, KW)],
     lambda inp, weight: (_o(_conv(inp, weight)),),
     tuple({"B": s["N"], "IP": s["C"], "H": s["H"], "W": s["W"], "OP": s["M"], "KH": s["KH"],
            "KW": s["KW"]} for s in _CONV_SIZES),
     atol=1e-4, tags=("reduction", "conv", "docs"))


def _maxpool_ref(inp):
    inp = _d(inp)
    B, C, H, W = inp.shape
    OH, OW = H // 2, W // 2
    v = inp[:, :, :2 * OH, :2 * OW].reshape(B, C, OH, 2, OW, 2)
    return (_o(v.max(axis=(3, 5))),)


_add("maxpool2x2", "docs.tc", "maxpool2x2", lambda rng, B, C, H, W: [_rn(rng, B, C, H, W)], _maxpool_ref,
     ({"B": 1, "C": 1, "H": 2, "W": 2}, {"B": 2, "C": 3, "H": 5, "W": 8}, {"B": 1, "C": 2, "H": 9, "W": 7}),
     tags=("reduction", "max", "where", "strided", "docs"))
_add("docs_softmax", "docs.tc", "softmax", lambda rng, N, D: [_rn(rng, N, D)],
     lambda I: (lambda e: (_o(e / e.sum(1)[:, None]), _o(e.sum(1))))(np.exp(_d(I))),
     _SM_SIZES, tags=("reduction", "builtin", "multi-output", "docs"))
_add("relu", "docs.tc", "relu", lambda rng, B, M: [_rn(rng, B, M)], lambda I: (_o(_relu(_d(I))),),
     ({"B": 1, "M": 1}, {"B": 10, "M": 12}), tags=("builtin", "docs"))
_add("docs_avgpool", "docs.tc", "avgpool", lambda rng, B, C, H, W: [_rn(rng, B, C, H, W)],
     _avgpool_ref(2, 3), ({"B": 1, "C": 1, "H": 2, "W": 3}, {"B": 2, "C": 3, "H": 5, "W": 7}),
     tags=("reduction", "where", "docs"))


# ==========================================================================
# test/test_lang.cc
# ==========================================================================

_LANG_SIZES = ({"M": 1, "N": 1}, {"M": 4, "N": 6}, {"M": 9, "N": 3})
_add("builtins_log_tanh", "lang.tc", "builtins_log_tanh", lambda rng, M: [_un(rng, 0.2, 3.0, M)],
     lambda I: (_o(np.log(np.tanh(_d(I))).sum()),), ({"M": 1}, {"M": 10}),
     tags=("builtin", "scalar", "reduction"))
_add("indirect_cast", "lang.tc", "indirect_cast",
     lambda rng, M, N: [_rn(rng, M), np.asarray(rng.integers(0, M, N), dtype=F32)],
     lambda A, B: (_o(_d(A)[np.asarray(B).astype(np.int64)].sum()),), _LANG_SIZES,
     tags=("indirect", "cast", "scalar", "reduction"))
_add("maxeq_indirect", "lang.tc", "maxeq_indirect",
     lambda rng, M, N: [_rn(rng, M), np.asarray(rng.integers(0, M, N), dtype=F32)],
     lambda A, B: (_o(_d(A)[np.asarray(B).astype(np.int64)].max()),), _LANG_SIZES,
     tags=("indirect", "cast", "scalar", "reduction", "max"))
_add("annotate", "lang.tc", "annotate",
     lambda rng, X, Y, Z: [_rn(rng, X, Y), _rn(rng, Y, Z)], lambda A, B: (_o(_d(A) @ _d(B)),),
     ({"X": 1, "Y": 1, "Z": 1}, {"X": 3, "Y": 4, "Z": 5}), tags=("reduction", "equivalence"))
_add("reduce_rows", "lang.tc", "reduce_rows", lambda rng, M, N: [_rn(rng, M, N)],
     lambda A: (_o(_d(A).sum(1)),), _LANG_SIZES, tags=("reduction",))
_add("assign_then_times", "lang.tc", "assign_then_times",
     lambda rng, M, N: [_un(rng, 0.5, 1.5, M, N), _rn(rng, M)],
     lambda A, B: (_o(_d(B) * _d(A).prod(1)),), _LANG_SIZES, tags=("reduction", "no-bang", "times"))
_add("maxeq_then_mineq", "lang.tc", "maxeq_then_mineq",
     lambda rng, M, N: [_rn(rng, M, N), _rn(rng, M, N)],
     lambda A, B: (_o(np.minimum(_d(A).max(1), _d(B).min(1))),), _LANG_SIZES,
     tags=("reduction", "no-bang", "max", "min"))
_add("plus_eq_uninit", "lang.tc", "plus_eq_uninit", lambda rng, M, N: [_rn(rng, M, N)],
     lambda A: (_o(_d(A).sum(1)),), _LANG_SIZES, tags=("reduction", "no-bang"))
_add("times_eq_uninit", "lang.tc", "times_eq_uninit", lambda rng, M, N: [_rn(rng, M, N)],
     # `*=` without `!` multiplies into the zero-initialised output
     lambda A: (_o(np.zeros(A.shape[0])),), _LANG_SIZES, tags=("reduction", "no-bang", "times"))
_add("max_eq_uninit", "lang.tc", "max_eq_uninit", lambda rng, M, N: [_rn(rng, M, N)],
     lambda A: (_o(np.maximum(0.0, _d(A).max(1))),), _LANG_SIZES, tags=("reduction", "no-bang", "max"))
_add("min_eq_uninit", "lang.tc", "min_eq_uninit", lambda rng, M, N: [_rn(rng, M, N)],
     lambda A: (_o(np.minimum(0.0, _d(A).min(1))),), _LANG_SIZES, tags=("reduction", "no-bang", "min"))
_add("batch_matmul_acc", "lang.tc", "batch_matmul_acc",
     lambda rng, B, N, M, K: [_rn(rng, B, N, M), _rn(rng, B, M, K)],
     lambda X, Y: (_o(np.einsum("bnm,bmk->bnk", _d(X), _d(Y))),),
     ({"B": 1, "N": 1, "M": 1, "K": 1}, {"B": 3, "N": 4, "M": 5, "K": 2}), tags=("reduction", "no-bang"))


# ==========================================================================
# tcdsl: integer division, element types
# ==========================================================================

def _divmod_inputs(dtype):
    def make(rng, N):
        a = np.asarray(rng.integers(-20, 21, N), dtype=dtype)
        b = np.asarray(rng.choice([-7, -4, -3, -2, -1, 1, 2, 3, 5], N), dtype=dtype)
        return [a, b]
    return make


def _divmod_ref(dtype):
    def ref(a, b):
        a64, b64 = np.asarray(a, np.int64), np.asarray(b, np.int64)
        return (np.floor_divide(a64, b64).astype(dtype), np.mod(a64, b64).astype(dtype))
    return ref


_add("floor_divmod", "int_ops.tc", "floor_divmod", _divmod_inputs(I32), _divmod_ref(I32),
     ({"N": 1}, {"N": 17}, {"N": 64}), rtol=0, atol=0, tags=("int", "div", "mod", "multi-output"))
_add("floor_divmod_i64", "int_ops.tc", "floor_divmod_i64", _divmod_inputs(np.int64),
     _divmod_ref(np.int64), ({"N": 1}, {"N": 33}), rtol=0, atol=0,
     tags=("int", "div", "mod", "multi-output"))
_add("divmod_const", "int_ops.tc", "divmod_const",
     lambda rng, N: [np.asarray(rng.integers(-20, 21, N), dtype=I32)],
     lambda a: tuple(f(np.asarray(a, np.int64), d).astype(I32) for f, d in (
         (np.floor_divide, 3), (np.mod, 3), (np.floor_divide, -4), (np.mod, -4))),
     ({"N": 1}, {"N": 41}), rtol=0, atol=0, tags=("int", "div", "mod", "multi-output"))
_add("index_divmod", "int_ops.tc", "index_divmod", lambda rng, N: [_rn(rng, N)],
     lambda x: (_o(_d(x) + np.floor_divide(np.arange(x.shape[0]) - 4, 3)
                   + np.mod(np.arange(x.shape[0]) - 4, 3)),),
     ({"N": 1}, {"N": 4}, {"N": 11}), tags=("int", "div", "mod", "index-value"))
_add("roll", "int_ops.tc", "roll", lambda rng, N: [_rn(rng, N)],
     lambda x: (_o(np.asarray(x)[np.mod(np.arange(x.shape[0]) - 3, x.shape[0])]),),
     ({"N": 1}, {"N": 2}, {"N": 7}), tags=("int", "mod", "where", "index-floor"))
_add("upsample_floor", "int_ops.tc", "upsample_floor", lambda rng, N: [_rn(rng, N)],
     lambda x: (_o(np.asarray(x)[np.floor_divide(np.arange(2 * x.shape[0] - 1) - 1, 2) + 1]),),
     ({"N": 1}, {"N": 2}, {"N": 6}), tags=("int", "div", "where", "index-floor"))

_add("scale_half", "dtypes.tc", "scale_half",
     lambda rng, N: [np.asarray(rng.standard_normal(N), dtype=np.float16)],
     lambda A: (_o(_d(A) * 2, np.float16),), ({"N": 1}, {"N": 13}), rtol=1e-3, atol=1e-3,
     tags=("types", "half"))
_add("sum_float16", "dtypes.tc", "sum_float16",
     lambda rng, N: [np.asarray(rng.integers(-3, 4, N), dtype=np.float16)],
     lambda A: (_o([_d(A).sum()], np.float16),), ({"N": 1}, {"N": 30}), rtol=0, atol=0,
     tags=("types", "half", "reduction", "where"))
_add("mask_select", "dtypes.tc", "mask_select",
     lambda rng, N: [_rn(rng, N), np.asarray(rng.integers(0, 2, N), dtype=np.bool_)],
     lambda A, M: (_o(np.where(np.asarray(M), _d(A), 0.0)),), ({"N": 1}, {"N": 17}),
     tags=("types", "bool", "ternary"))
_add("byte_lut", "dtypes.tc", "byte_lut",
     lambda rng, N: [_rn(rng, 256), np.asarray(rng.integers(0, 256, N), dtype=np.uint8)],
     lambda L, C: (_o(np.asarray(L)[np.asarray(C)]),), ({"N": 1}, {"N": 40}),
     tags=("types", "uint8", "indirect", "cast", "const-size"))
_add("widen", "dtypes.tc", "widen", lambda rng, N: [_rn(rng, N)],
     lambda A: (_o(A, np.float64),), ({"N": 1}, {"N": 8}), tags=("types", "typed-output"))
_add("mixed_int", "dtypes.tc", "mixed_int",
     lambda rng, N: [np.asarray(rng.integers(-100, 100, N), dtype=np.int8),
                     np.asarray(rng.integers(-1000, 1000, N), dtype=np.int16),
                     np.asarray(rng.integers(0, 100, N), dtype=np.uint8)],
     # TC's promotion: int8 + int16 -> int16; int16 + uint8 -> int16
     lambda a, b, c: ((np.asarray(a, np.int64) + np.asarray(b, np.int64) + np.asarray(c, np.int64)).astype(np.int16),),
     ({"N": 1}, {"N": 12}), rtol=0, atol=0, tags=("types", "int", "promotion"))
_add("double_matmul", "dtypes.tc", "double_matmul",
     lambda rng, M, K, N: [rng.standard_normal((M, K)), rng.standard_normal((K, N))],
     lambda A, B: (_o(A @ B, np.float64),), ({"M": 1, "K": 1, "N": 1}, {"M": 5, "K": 7, "N": 3}),
     rtol=1e-10, atol=1e-12, tags=("types", "double", "reduction"))
_add("int_minmax", "dtypes.tc", "int_minmax",
     lambda rng, N, K: [np.asarray(rng.choice([-3, -2, -1, 1, 2, 3], (N, K)), dtype=I32)],
     lambda A: (np.asarray(A).min(1).astype(I32), np.asarray(A).max(1).astype(I32),
                np.asarray(A, np.int64).prod(1).astype(I32)),
     ({"N": 1, "K": 1}, {"N": 5, "K": 6}), rtol=0, atol=0,
     tags=("types", "int", "reduction", "min", "max", "times", "multi-output"))


# ==========================================================================
# tcdsl loop extension (SPEC 1.2): RNNs and scans
# ==========================================================================

_RNN_SIZES = ({"T": 1, "B": 1, "I": 1, "H": 1}, {"T": 3, "B": 2, "I": 4, "H": 5},
              {"T": 7, "B": 3, "I": 5, "H": 6}, {"T": 16, "B": 2, "I": 3, "H": 4})


def _elman_ref(inp, h0, i2h, h2h):
    x, h, i2h, h2h = _d(inp), _d(h0), _d(i2h), _d(h2h)
    out = []
    for t in range(x.shape[0]):
        h = np.tanh(h @ h2h + x[t] @ i2h)
        out.append(h)
    return (_o(np.stack(out)),)


_add("elman_rnn", "elman_rnn.tc", "elman_rnn",
     lambda rng, T, B, Ci, Co: [_rn(rng, T, B, Ci), _rn(rng, B, Co),
                                _un(rng, -0.5, 0.5, Ci, Co), _un(rng, -0.5, 0.5, Co, Co)],
     _elman_ref,
     tuple({"T": s["T"], "B": s["B"], "Ci": s["I"], "Co": s["H"]} for s in _RNN_SIZES),
     tags=("rnn", "loop", "if", "reduction", "builtin"))


def _qrnn_ref(x, Wz, Wf, Wo):
    x = _d(x)
    T, B, _ = x.shape
    H = Wz.shape[2]
    hs, cs = [], []
    c = np.zeros((B, H))

    def gate(W, t):
        W = _d(W)
        g = x[t] @ W[1]
        if t > 0:
            g = g + x[t - 1] @ W[0]
        return g
    for t in range(T):
        z, f, o = np.tanh(gate(Wz, t)), _sigmoid(gate(Wf, t)), _sigmoid(gate(Wo, t))
        c = (1 - f) * z if t == 0 else f * c + (1 - f) * z
        cs.append(c)
        hs.append(o * c)
    return (_o(np.stack(hs)), _o(np.stack(cs)))


_add("qrnn_fo", "qrnn.tc", "qrnn_fo",
     lambda rng, T, B, I, H: [_rn(rng, T, B, I)] + [_un(rng, -0.5, 0.5, 2, I, H) for _ in range(3)],
     _qrnn_ref, _RNN_SIZES, tags=("rnn", "loop", "if", "temporary", "reduction", "builtin", "multi-output"))


def _lstm_ref(x, h0, c0, Wx, Wh, bias):
    x, h, c = _d(x), _d(h0), _d(c0)
    Wx, Wh, bias = _d(Wx), _d(Wh), _d(bias)
    hs, cs = [], []
    for t in range(x.shape[0]):
        g = np.einsum("bi,gij->gbj", x[t], Wx) + np.einsum("bk,gkj->gbj", h, Wh) + bias[:, None, :]
        c = _sigmoid(g[1]) * c + _sigmoid(g[0]) * np.tanh(g[2])
        h = _sigmoid(g[3]) * np.tanh(c)
        hs.append(h)
        cs.append(c)
    return (_o(np.stack(hs)), _o(np.stack(cs)))


_add("lstm", "lstm.tc", "lstm",
     lambda rng, T, B, I, H: [_rn(rng, T, B, I), _rn(rng, B, H), _rn(rng, B, H),
                              _un(rng, -0.5, 0.5, 4, I, H), _un(rng, -0.5, 0.5, 4, H, H),
                              _un(rng, -0.5, 0.5, 4, H)],
     _lstm_ref, _RNN_SIZES, tags=("rnn", "loop", "temporary", "reduction", "no-bang", "builtin", "multi-output"))


def _gru_ref(x, h0, Wx, Wh, bx, bh):
    x, h = _d(x), _d(h0)
    Wx, Wh, bx, bh = _d(Wx), _d(Wh), _d(bx), _d(bh)
    hs = []
    for t in range(x.shape[0]):
        gx = np.einsum("bi,gij->gbj", x[t], Wx) + bx[:, None, :]
        gh = np.einsum("bk,gkj->gbj", h, Wh) + bh[:, None, :]
        r = _sigmoid(gx[0] + gh[0])
        z = _sigmoid(gx[1] + gh[1])
        n = np.tanh(gx[2] + r * gh[2])
        h = (1 - z) * n + z * h
        hs.append(h)
    return (_o(np.stack(hs)),)


_add("gru", "gru.tc", "gru",
     lambda rng, T, B, I, H: [_rn(rng, T, B, I), _rn(rng, B, H),
                              _un(rng, -0.5, 0.5, 3, I, H), _un(rng, -0.5, 0.5, 3, H, H),
                              _un(rng, -0.5, 0.5, 3, H), _un(rng, -0.5, 0.5, 3, H)],
     _gru_ref, _RNN_SIZES, tags=("rnn", "loop", "if", "temporary", "reduction", "builtin"))


def _stacked_ref(x, h0, Wi, Wh):
    x, h0, Wi, Wh = _d(x), _d(h0), _d(Wi), _d(Wh)
    L = h0.shape[0]
    T = x.shape[0]
    hs = np.zeros((L, T) + x.shape[1:])
    for l in range(L):
        inp = x if l == 0 else hs[l - 1]
        h = h0[l]
        for t in range(T):
            h = np.tanh(inp[t] @ Wi[l] + h @ Wh[l])
            hs[l, t] = h
    return (_o(hs), _o(hs[L - 1, T - 1]))


_add("stacked_rnn", "stacked_rnn.tc", "stacked_rnn",
     lambda rng, T, B, H, L: [_rn(rng, T, B, H), _rn(rng, L, B, H),
                              _un(rng, -0.5, 0.5, L, H, H), _un(rng, -0.5, 0.5, L, H, H)],
     _stacked_ref,
     ({"T": 1, "B": 1, "H": 1, "L": 1}, {"T": 4, "B": 2, "H": 3, "L": 2},
      {"T": 6, "B": 3, "H": 5, "L": 2}, {"T": 3, "B": 1, "H": 4, "L": 3}),
     tags=("rnn", "loop", "nested-loop", "if", "temporary", "reduction", "no-bang", "multi-output"))


def _reverse_rnn_ref(x, h0, Wi, Wh):
    x, h = _d(x), _d(h0)
    T = x.shape[0]
    hs = []
    for t in range(T):
        h = np.tanh(h @ _d(Wh) + x[T - 1 - t] @ _d(Wi))
        hs.append(h)
    return (_o(np.stack(hs)),)


_add("reverse_rnn", "reverse_rnn.tc", "reverse_rnn",
     lambda rng, T, B, I, H: [_rn(rng, T, B, I), _rn(rng, B, H),
                              _un(rng, -0.5, 0.5, I, H), _un(rng, -0.5, 0.5, H, H)],
     _reverse_rnn_ref, _RNN_SIZES, tags=("rnn", "loop", "if", "reversed", "reduction", "builtin"))
_add("prefix_sum", "scans.tc", "prefix_sum", lambda rng, N, M: [_rn(rng, N, M)],
     lambda x: (_o(np.cumsum(_d(x), axis=0)),), ({"N": 1, "M": 1}, {"N": 2, "M": 3}, {"N": 9, "M": 4}),
     tags=("loop", "loop-range", "where", "scan"))


def _iir_ref(x, a):
    x, a = _d(x), float(a)
    y = x.copy()
    for t in range(1, x.shape[0] - 1):
        y[t] = a * y[t - 1] + (1 - a) * x[t + 1]
    return (_o(y),)


_add("iir_smooth", "scans.tc", "iir_smooth", lambda rng, T, C: [_rn(rng, T, C), _un(rng, 0.2, 0.8)],
     _iir_ref, ({"T": 2, "C": 1}, {"T": 3, "C": 2}, {"T": 10, "C": 5}),
     tags=("loop", "loop-range", "scalar", "scan"))


def _gated_scan_ref(x):
    x = _d(x)
    T = x.shape[0]
    y = np.zeros_like(x)
    acc = np.zeros(x.shape[1])
    for t in range(T):
        if t == 0:
            y[t] = x[t]
        elif t < 3 and t != 1:
            y[t] = 0.5 * y[t - 1] + x[t]
        elif t >= T - 2 or t == 1:
            y[t] = y[t - 1] - x[t]
        elif not (t > 5):
            y[t] = np.maximum(y[t - 1], x[t])
        else:
            y[t] = np.minimum(y[t - 1], x[t])
        if t <= 2:
            acc += x[t]
    return (_o(y), _o(acc))


_add("gated_scan", "scans.tc", "gated_scan", lambda rng, T, B: [_rn(rng, T, B)], _gated_scan_ref,
     ({"T": 1, "B": 1}, {"T": 2, "B": 3}, {"T": 5, "B": 2}, {"T": 9, "B": 4}, {"T": 12, "B": 1}),
     tags=("loop", "if", "else-if", "logic", "no-bang", "builtin", "multi-output"))
_add("causal_mean", "scans.tc", "causal_mean", lambda rng, T, B, C: [_rn(rng, T, B, C)],
     lambda x: (_o(np.cumsum(_d(x), axis=0) / np.arange(1, x.shape[0] + 1)[:, None, None]),),
     ({"T": 1, "B": 1, "C": 1}, {"T": 5, "B": 2, "C": 3}, {"T": 11, "B": 1, "C": 4}),
     tags=("loop", "where", "loop-var-in-where", "reduction"))


def _power_ref(A, v0, steps):
    A, v = _d(A), _d(v0)
    for _ in range(steps.shape[0]):
        w = A @ v
        v = w / np.sqrt(w @ w)
    return (_o(v),)


_add("power_iteration", "scans.tc", "power_iteration",
     lambda rng, N, K: [_rn(rng, N, N), _rn(rng, N), np.zeros(K, F32)], _power_ref,
     ({"N": 1, "K": 1}, {"N": 4, "K": 3}, {"N": 7, "K": 6}), rtol=1e-3, atol=1e-4,
     tags=("loop", "temporary", "scalar", "reduction", "builtin"))


# --------------------------------------------------------------------------

def _check_unique():
    names = [c.name for c in CASES]
    dup = {n for n in names if names.count(n) > 1}
    assert not dup, f"duplicate case names: {sorted(dup)}"


_check_unique()
