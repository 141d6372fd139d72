"""Self-checks of the corpus (tests/programs): no compiler involved.

* every case names an existing .tc file and a def in it;
* make_inputs(rng, **sizes) works for each size setting and agrees with the
  def's signature (count, element types, ranks, constant sizes, repeated
  size names), and the setting only names sizes of the def;
* reference(*inputs) returns a tuple with one array per output, of the
  declared rank and element type where the output is typed;
* a few references are checked against independent computations (torch on
  CPU, np.einsum, plain Python).
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import cases as corpus  # noqa: E402

torch = pytest.importorskip("torch")
F = torch.nn.functional


# --------------------------------------------------------------------------
# a small reader for def signatures (enough for this corpus)

_DTYPES = {
    "float": np.float32, "float32": np.float32, "double": np.float64,
    "float64": np.float64, "half": np.float16, "float16": np.float16,
    "bool": np.bool_, "byte": np.uint8,
    "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
    "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64,
}


def _strip_comments(text):
    return "\n".join(line.split("#", 1)[0] for line in text.splitlines())


def _split_top(s):
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    return [p.strip() for p in parts]


def _balanced(text, start):
    """text[start] == '('; return (inside, index after the closing paren)"""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return text[start + 1:i], i + 1
    raise ValueError("unbalanced")


def _param(p):
    p = " ".join(p.split())
    m = re.fullmatch(r"(\w+)\s*(?:\((.*)\))?\s+(\w+)", p)
    if m:
        ty, dims, name = m.groups()
        dims = [] if dims is None else [d.strip() for d in dims.split(",") if d.strip()]
        return name, ty, dims
    m = re.fullmatch(r"(\w+)", p)
    assert m, f"cannot read parameter {p!r}"
    return m.group(1), None, None


def read_defs(path):
    text = _strip_comments(Path(path).read_text())
    defs = {}
    for m in re.finditer(r"\bdef\s+(\w+)\s*\(", text):
        name = m.group(1)
        params_src, pos = _balanced(text, m.end() - 1)
        arrow = re.compile(r"\s*->\s*\(").match(text, pos)
        assert arrow, f"{path}: def {name}: expected -> ("
        outs_src, _ = _balanced(text, arrow.end() - 1)
        params = [_param(p) for p in _split_top(params_src)]
        outs = [_param(p) for p in _split_top(outs_src)]
        assert name not in defs, f"{path}: def {name} twice"
        defs[name] = (params, outs)
    return defs


_DEFS = {}


def defs_of(file):
    if file not in _DEFS:
        _DEFS[file] = read_defs(HERE / file)
    return _DEFS[file]


# --------------------------------------------------------------------------

ALL = corpus.CASES
IDS = [c.name for c in ALL]


def test_corpus_is_large_and_unique():
    assert len(set(IDS)) == len(IDS)
    programs = {(c.file, c.entry) for c in ALL}
    assert len(programs) >= 40
    assert len({c.file for c in ALL}) >= 20
    assert sum("rnn" in c.tags for c in ALL) >= 6


def test_every_tc_file_is_used_and_parses():
    files = sorted(p.name for p in HERE.glob("*.tc"))
    used = {c.file for c in ALL}
    assert set(files) == used, (set(files) ^ used)
    for f in files:
        text = (HERE / f).read_text()
        assert text.startswith("#"), f"{f}: first line must be a '#' origin comment"
        assert defs_of(f)


@pytest.mark.parametrize("case", ALL, ids=IDS)
def test_case(case):
    path = HERE / case.file
    assert path.is_file(), case.file
    defs = defs_of(case.file)
    assert case.entry in defs, f"{case.file} has no def {case.entry}"
    params, outs = defs[case.entry]
    size_names = {d for _, _, dims in params for d in dims if not d.isdigit()}
    assert case.sizes, "at least one size setting"
    rng = np.random.default_rng(1234)
    for sizes in case.sizes:
        assert set(sizes) <= size_names, f"{sizes} names sizes the def lacks ({sorted(size_names)})"
        inputs = case.make_inputs(rng, **sizes)
        assert isinstance(inputs, list) and len(inputs) == len(params)
        bound = {}
        total = 0
        for x, (pname, ty, dims) in zip(inputs, params):
            assert isinstance(x, np.ndarray), pname
            assert x.dtype == np.dtype(_DTYPES[ty]), f"{pname}: {x.dtype} vs {ty}"
            assert x.ndim == len(dims), f"{pname}: rank {x.ndim} vs {dims}"
            for d, n in zip(dims, x.shape):
                assert n >= 1, f"{pname}: empty dimension"
                if d.isdigit():
                    assert n == int(d), f"{pname}: constant size {d} vs {n}"
                else:
                    assert bound.setdefault(d, n) == n, f"size {d} disagrees at {pname}"
            total += x.size
        for k, v in sizes.items():
            assert bound[k] == v, f"size {k}: setting {v}, inputs {bound[k]}"
        out = case.reference(*inputs)
        assert isinstance(out, tuple) and len(out) == len(outs), \
            f"{len(out)} outputs for -> ({', '.join(o[0] for o in outs)})"
        for y, (oname, ty, dims) in zip(out, outs):
            assert isinstance(y, np.ndarray), oname
            assert y.dtype.kind in "biuf", f"{oname}: dtype {y.dtype}"
            assert all(n >= 1 for n in y.shape), f"{oname}: empty {y.shape}"
            if ty is not None:
                assert y.dtype == np.dtype(_DTYPES[ty]), f"{oname}: {y.dtype} vs {ty}"
                assert y.ndim == len(dims), oname
            if y.dtype.kind == "f":
                assert np.all(np.isfinite(y)), f"{oname} has inf/nan"
            total += y.size
        assert total <= 300_000, f"inputs and outputs too large ({total} elements)"


# --------------------------------------------------------------------------
# references against independent computations

def _run(name, sizes, seed=7):
    c = corpus.by_name(name)
    ins = c.make_inputs(np.random.default_rng(seed), **sizes)
    return ins, c.reference(*ins)


def _t(x):
    return torch.from_numpy(np.asarray(x, dtype=np.float64))


def _close(a, b, rtol=1e-5, atol=1e-5):
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=rtol, atol=atol)


@pytest.mark.parametrize("name, ta, tb", [("matmul", 0, 0), ("matmul_tn", 1, 0),
                                          ("matmul_nt", 0, 1), ("matmul_tt", 1, 1)])
def test_matmul_against_einsum(name, ta, tb):
    for s in corpus.by_name(name).sizes:
        (A, B), (O,) = _run(name, s)
        A = A.T if ta else A
        B = B.T if tb else B
        _close(O, np.einsum("ik,kj->ij", A.astype(np.float64), B.astype(np.float64)))


def test_batch_matmul_against_torch():
    for s in corpus.by_name("batch_matmul").sizes:
        (X, Y), (Z,) = _run("batch_matmul", s)
        _close(Z, torch.bmm(_t(X), _t(Y)))


@pytest.mark.parametrize("name, stride", [("convolution", (1, 1)), ("convolution_s2x2", (2, 2)),
                                          ("convolution_s2x3", (2, 3)), ("py_convolution", (1, 1))])
def test_convolution_against_torch(name, stride):
    for s in corpus.by_name(name).sizes:
        (I, W1, B), (O,) = _run(name, s)
        _close(O, F.conv2d(_t(I), _t(W1), _t(B), stride=stride), atol=1e-4)


@pytest.mark.parametrize("name, stride", [("group_convolution", 1), ("group_convolution_s2x2", 2)])
def test_group_convolution_against_torch(name, stride):
    for s in corpus.by_name(name).sizes:
        (I, W1, B), (O,) = _run(name, s)
        N, G, C, H, W = I.shape
        Fo = W1.shape[1]
        ref = F.conv2d(_t(I).reshape(N, G * C, H, W), _t(W1).reshape(G * Fo, C, *W1.shape[3:]),
                       _t(B).reshape(-1), stride=stride, groups=G)
        _close(O, ref.reshape(O.shape), atol=1e-4)


def test_masked_conv_against_torch():
    for s in corpus.by_name("masked_convolve").sizes:
        (I, Wt, Mask), (O,) = _run("masked_convolve", s)
        w = _t(Wt) * torch.from_numpy((Mask == 1).astype(np.float64))[:, :, None, None]
        _close(O, F.conv2d(F.relu(_t(I)), w), atol=1e-4)


def test_convolution_igrad_against_conv_transpose():
    for s in corpus.by_name("convolution_igrad").sizes:
        (W1, d_O), (d_I,) = _run("convolution_igrad", s)
        KH, KW = W1.shape[2:]
        H, W = d_O.shape[2:]
        full = F.conv_transpose2d(_t(d_O), _t(W1))[:, :, :H, :W].numpy()
        full[:, :, :KH - 1, :] = 0.0       # rows/cols the inferred range does not write
        full[:, :, :, :KW - 1] = 0.0
        _close(d_I, full, atol=1e-4)


def test_convolution_grad_matches_autograd_for_1x1():
    (I, W1, Bias, d_O), (d_I, d_W1, d_Bias) = _run(
        "convolution_grad", {"N": 2, "C": 3, "H": 5, "W": 6, "M": 4, "KH": 1, "KW": 1})
    tI, tW = _t(I).requires_grad_(), _t(W1).requires_grad_()
    F.conv2d(tI, tW).backward(_t(d_O))
    _close(d_I, tI.grad, atol=1e-4)
    _close(d_W1, tW.grad, atol=1e-4)
    _close(d_Bias, Bias)


def test_pooling_against_torch():
    for s in corpus.by_name("avgpool").sizes:
        (x,), (o,) = _run("avgpool", s)
        _close(o, F.avg_pool2d(_t(x), (2, 2), stride=1))
    for s in corpus.by_name("docs_avgpool").sizes:
        (x,), (o,) = _run("docs_avgpool", s)
        _close(o, F.avg_pool2d(_t(x), (2, 3), stride=1))
    for s in corpus.by_name("maxpool2x2").sizes:
        (x,), (o,) = _run("maxpool2x2", s)
        _close(o, F.max_pool2d(_t(x), 2))


def test_softmax_against_torch():
    for name in ("softmax_fused", "softmax_expdist", "softmax_tmp", "docs_softmax"):
        for s in corpus.by_name(name).sizes:
            (I,), outs = _run(name, s)
            _close(outs[0], torch.softmax(_t(I), dim=1))


def test_group_norm_against_torch():
    for name in ("group_normalization_single_kernel", "py_group_normalization",
                 "group_normalization_example"):
        for s in corpus.by_name(name).sizes:
            if s["N"] * s["D"] * s["H"] * s["W"] == 1:
                continue                  # torch refuses one value per group
            (I, gamma, beta), outs = _run(name, s)
            O = outs[2] if name == "py_group_normalization" else outs[0]
            N, G, D, H, W = I.shape
            ref = F.group_norm(_t(I).reshape(N, G * D, H, W), G, _t(gamma).reshape(-1),
                               _t(beta).reshape(-1), eps=1e-5)
            _close(O, ref.reshape(I.shape), rtol=1e-3, atol=1e-3)


def test_lut_against_embedding_bag():
    for s in corpus.by_name("lut").sizes:
        (LUT, I), (O,) = _run("lut", s)
        ref = F.embedding_bag(torch.from_numpy(I.astype(np.int64)), _t(LUT), mode="sum")
        _close(O, ref)


def test_floor_division_against_python():
    for name in ("floor_divmod", "floor_divmod_i64"):
        for s in corpus.by_name(name).sizes:
            (a, b), (q, r) = _run(name, s)
            for x, y, qq, rr in zip(a.tolist(), b.tolist(), q.tolist(), r.tolist()):
                assert (qq, rr) == (x // y, x % y)
                assert qq * y + rr == x
    # the rounding matters: truncation would give -3 and -1 here
    q, r = corpus.by_name("floor_divmod").reference(np.array([-7], np.int32), np.array([2], np.int32))
    assert (int(q[0]), int(r[0])) == (-4, 1)


def _torch_rnn_weights(rnn, layer, Wi, Wh):
    getattr(rnn, f"weight_ih_l{layer}").data = _t(Wi).T.contiguous()
    getattr(rnn, f"weight_hh_l{layer}").data = _t(Wh).T.contiguous()


def test_elman_against_torch_rnn():
    for s in corpus.by_name("elman_rnn").sizes:
        (x, h0, i2h, h2h), (hidden,) = _run("elman_rnn", s)
        rnn = torch.nn.RNN(x.shape[2], h0.shape[1], bias=False).double()
        _torch_rnn_weights(rnn, 0, i2h, h2h)
        with torch.no_grad():
            out, _ = rnn(_t(x), _t(h0)[None])
        _close(hidden, out)


def test_stacked_against_torch_rnn():
    for s in corpus.by_name("stacked_rnn").sizes:
        (x, h0, Wi, Wh), (hs, last) = _run("stacked_rnn", s)
        L = h0.shape[0]
        rnn = torch.nn.RNN(x.shape[2], x.shape[2], num_layers=L, bias=False).double()
        for l in range(L):
            _torch_rnn_weights(rnn, l, Wi[l], Wh[l])
        with torch.no_grad():
            out, hn = rnn(_t(x), _t(h0))
        _close(hs[-1], out)
        _close(last, hn[-1])


def test_reverse_rnn_against_torch_rnn():
    for s in corpus.by_name("reverse_rnn").sizes:
        (x, h0, Wi, Wh), (h,) = _run("reverse_rnn", s)
        rnn = torch.nn.RNN(x.shape[2], h0.shape[1], bias=False).double()
        _torch_rnn_weights(rnn, 0, Wi, Wh)
        with torch.no_grad():
            out, _ = rnn(_t(x[::-1].copy()), _t(h0)[None])
        _close(h, out)


def test_lstm_against_torch_cell():
    for s in corpus.by_name("lstm").sizes:
        (x, h0, c0, Wx, Wh, bias), (h, c) = _run("lstm", s)
        cell = torch.nn.LSTMCell(x.shape[2], h0.shape[1]).double()
        cell.weight_ih.data = _t(np.concatenate([Wx[g].T for g in range(4)]))
        cell.weight_hh.data = _t(np.concatenate([Wh[g].T for g in range(4)]))
        cell.bias_ih.data = _t(bias.reshape(-1))
        cell.bias_hh.data = torch.zeros_like(cell.bias_hh)
        hh, cc = _t(h0), _t(c0)
        with torch.no_grad():
            for t in range(x.shape[0]):
                hh, cc = cell(_t(x[t]), (hh, cc))
                _close(h[t], hh)
                _close(c[t], cc)


def test_gru_against_torch_cell():
    for s in corpus.by_name("gru").sizes:
        (x, h0, Wx, Wh, bx, bh), (h,) = _run("gru", s)
        cell = torch.nn.GRUCell(x.shape[2], h0.shape[1]).double()
        cell.weight_ih.data = _t(np.concatenate([Wx[g].T for g in range(3)]))
        cell.weight_hh.data = _t(np.concatenate([Wh[g].T for g in range(3)]))
        cell.bias_ih.data = _t(bx.reshape(-1))
        cell.bias_hh.data = _t(bh.reshape(-1))
        hh = _t(h0)
        with torch.no_grad():
            for t in range(x.shape[0]):
                hh = cell(_t(x[t]), hh)
                _close(h[t], hh)


def test_mindis_against_brute_force():
    for s in corpus.by_name("mindis").sizes:
        (L, Codes), (S, v, idx) = _run("mindis", s)
        N, M = Codes.shape
        S2 = [sum(float(L[m, int(Codes[n, m])]) for m in range(M)) for n in range(N)]
        assert list(S) == S2
        assert float(v) == min(S2)
        assert int(idx) == S2.index(min(S2))
