"""tcdsl.torch.op: tcdsl kernels as PyTorch operators with autograd."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tcdsl  # noqa: E402
import tcdsl.torch  # noqa: E402

from helpers import ROOT  # noqa: E402

ELMAN = (ROOT / "examples" / "rnn" / "elman.tc").read_text().replace("float(", "double(")

GEN = torch.Generator().manual_seed(0)


def randn(*shape, requires_grad=True, scale=1.0):
    return (torch.randn(shape, dtype=torch.float64, generator=GEN) * scale).requires_grad_(requires_grad)


# Programs with loops and conditionals, max reductions, norms, offsets and
# indirect reads; each with inputs for gradcheck (float64).
CASES = {
    "elman": (ELMAN, lambda: [randn(4, 2, 3), randn(2, 5), randn(3, 5, scale=0.5), randn(5, 5, scale=0.5)]),
    "gated_loop": ("""
        def gated(double(T,B,H) x, double(H,H) W, double(H) u) -> (h, s) {
          for t in T {
            if t == 0 { h(t, b, j) = tanh(x(t, b, j)) }
            else {
              a(b, j) +=! h(t - 1, b, k) * W(k, j)
              h(t, b, j) = sigmoid(u(j)) * tanh(a(b, j) + x(t, b, j)) + (1 - sigmoid(u(j))) * h(t - 1, b, j)
            }
          }
          s(b) max=! h(t, b, j) * h(t, b, j)
        }""", lambda: [randn(4, 2, 3), randn(3, 3, scale=0.5), randn(3)]),
    "max_pool": ("""
        def pool(double(N,C,W) x) -> (y) { y(n, c, i) max=! x(n, c, 2 * i + k) where k in 0:2, i in 0:W/2 }""",
                 lambda: [randn(2, 3, 6)]),
    "layernorm": ("""
        def layernorm(double(N,C) x, double(C) gamma, double(C) beta) -> (y) {
          mean(n) +=! x(n, c) / C
          var(n) +=! (x(n, c) - mean(n)) * (x(n, c) - mean(n)) / C
          y(n, c) = (x(n, c) - mean(n)) * rsqrt(var(n) + 1e-5) * gamma(c) + beta(c)
        }""", lambda: [randn(3, 5), randn(5), randn(5)]),
    "conv_offsets": ("""
        def conv(double(T,B,C) x, double(K,C,H) w) -> (y) { y(t, b, h) +=! x(t + k, b, c) * w(k, c, h) }""",
                     lambda: [randn(6, 2, 3), randn(3, 3, 2)]),
    "embedding": ("""
        def bag(double(V,D) E, int32(N,L) ids, double(D) w) -> (y) {
          y(n) +=! E(ids(n, l), d) * w(d)
        }""", lambda: [randn(7, 3), torch.tensor([[0, 3, 3], [6, 1, 0]], dtype=torch.int32), randn(3)]),
    # more of each kind, in other shapes (the held-out programs are not these)
    "embedding_rnn": ("""
        def embrnn(double(V,H) E, int32(T,B) ids, double(H,H) W) -> (h) {
          for t in T {
            if t == 0 { h(t, b, j) = tanh(E(ids(t, b), j)) }
            else {
              h(t, b, j) +=! h(t - 1, b, k) * W(k, j)
              h(t, b, j) = tanh(h(t, b, j) + E(ids(t, b), j))
            }
          }
        }""", lambda: [randn(5, 3), torch.tensor([[0, 4], [2, 2], [4, 1]], dtype=torch.int32), randn(3, 3, scale=0.5)]),
    "softmax": ("""
        def softmax(double(N,C) x) -> (y) {
          m(n) max=! x(n, c)
          e(n, c) = exp(x(n, c) - m(n))
          s(n) +=! e(n, c)
          y(n, c) = e(n, c) / s(n)
        }""", lambda: [randn(3, 4)]),
    "rmsnorm": ("""
        def rmsnorm(double(N,C) x, double(C) g) -> (y) {
          ss(n) +=! x(n, c) * x(n, c)
          y(n, c) = x(n, c) / sqrt(ss(n) / C + 1e-6) * g(c)
        }""", lambda: [randn(3, 5), randn(5)]),
    "min_over_time": ("""
        def minpool(double(T,B,H) x, double(H,H) W) -> (y, h) {
          for t in T {
            if t == 0 { h(t, b, j) = sigmoid(x(t, b, j)) }
            else {
              h(t, b, j) +=! h(t - 1, b, k) * W(k, j)
              h(t, b, j) = sigmoid(h(t, b, j) + x(t, b, j))
            }
          }
          y(b, j) min=! h(t, b, j)
        }""", lambda: [randn(4, 2, 3), randn(3, 3, scale=0.5)]),
    "pool2d": ("""
        def pool2d(double(H,W) x) -> (y) {
          y(i, j) max=! x(i + di, j + dj) where di in 0:2, dj in 0:3
        }""", lambda: [randn(5, 6)]),
    "padded_conv": ("""
        def pconv(double(N) x, double(K) w) -> (y) {
          y(i) +=! (i + k - 1 >= 0 && i + k - 1 < N) ? x(i + k - 1) * w(k) : 0.0 where i in 0:N, k in 0:K
        }""", lambda: [randn(7), randn(3)]),
    # inputs declared with an expression of sizes (a stacked gate weight of 4 * H rows)
    "stacked_gates": ("""
        def gates(double(B,I) x, double(4 * H, I) W) -> (g, o) {
          g(b, j) +=! x(b, i) * W(j, i)
          o(b, j) = tanh(g(b, j)) * sigmoid(g(b, j + H)) where j in 0:H
        }""", lambda: [randn(3, 5), randn(8, 5)]),
    "stacked_columns": ("""
        def cols(double(B,I) x, double(I, 2 * H) W) -> (y) { y(b, r) +=! x(b, i) * W(i, r) }""",
                        lambda: [randn(3, 5), randn(5, 6)]),
    "shifted_loop": ("""
        def shifted(double(T,N) x, double(N) w) -> (y) {
          for t in 1:T { y(t, i) = tanh(x(t, i) * w(i) + x(t - 1, i)) where i in 0:N }
        }""", lambda: [randn(5, 3), randn(3)]),
}


# A loop, a reduction, an indirect read and a padded convolution by default;
# the other cases under ``-m slow``.
GRADCHECK_DEFAULT = {"shifted_loop", "softmax", "embedding", "padded_conv"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=[] if n in GRADCHECK_DEFAULT else [pytest.mark.slow])
                                  for n in sorted(CASES)])
def test_gradcheck(name):
    src, make = CASES[name]
    f = tcdsl.torch.op(src)
    args = make()
    assert torch.autograd.gradcheck(f, args)


def test_matches_pytorch_autograd():
    f = tcdsl.torch.op(ELMAN)
    x, h0, i2h, h2h = CASES["elman"][1]()
    hidden = f(x, h0, i2h, h2h)
    loss = (hidden * torch.arange(hidden.numel(), dtype=torch.float64).reshape(hidden.shape)).sum()
    grads = torch.autograd.grad(loss, (x, h0, i2h, h2h))
    h, hs = h0, []
    for t in range(x.shape[0]):
        h = torch.tanh(h @ h2h + x[t] @ i2h)
        hs.append(h)
    ref = torch.stack(hs)
    torch.testing.assert_close(hidden, ref)
    loss_ref = (ref * torch.arange(ref.numel(), dtype=torch.float64).reshape(ref.shape)).sum()
    for g, r in zip(grads, torch.autograd.grad(loss_ref, (x, h0, i2h, h2h))):
        torch.testing.assert_close(g, r)


@pytest.mark.slow
def test_in_a_module_and_under_torch_compile_without_graph_break():
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.i2h = torch.nn.Parameter(randn(3, 5, requires_grad=False) * 0.5)
            self.h2h = torch.nn.Parameter(randn(5, 5, requires_grad=False) * 0.5)
            self.rnn = tcdsl.torch.op(ELMAN)

        def forward(self, x, h0):
            return self.rnn(x, h0, self.i2h, self.h2h)[-1].sum(dim=1)

    m = Model()
    x, h0 = randn(4, 2, 3, requires_grad=False), randn(2, 5, requires_grad=False)
    explained = torch._dynamo.explain(m)(x, h0)
    assert explained.graph_break_count == 0 and explained.graph_count == 1
    eager = m(x, h0)
    eager.sum().backward()
    ref = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    compiled = torch.compile(m)
    out = compiled(x, h0)
    out.sum().backward()
    torch.testing.assert_close(out, eager)
    for p, r in zip(m.parameters(), ref):
        torch.testing.assert_close(p.grad, r)


def test_function_under_dynamo_explain_has_no_graph_break():
    lstm = (ROOT / "examples" / "rnn" / "lstm.tc").read_text().replace("float(", "double(")
    f = tcdsl.torch.op(lstm)  # two outputs
    g = tcdsl.torch.op(CASES["embedding"][0])  # an integer input

    def fn(x, h0, c0, Wx, Wh, bias, E, ids, w):
        h, c = f(x, h0, c0, Wx, Wh, bias)
        return h.relu().sum() + c.mean() + g(E, ids, w).sum()

    args = [randn(3, 2, 4), randn(2, 5), randn(2, 5), randn(4, 4, 5), randn(4, 5, 5), randn(4, 5),
            *CASES["embedding"][1]()]
    explained = torch._dynamo.explain(fn)(*args)
    assert explained.graph_break_count == 0, explained.break_reasons
    assert explained.graph_count == 1


def test_saves_only_what_the_adjoint_reads():
    # the adjoint of y = tanh(x + s) reads y (1 - y^2), neither input
    f = tcdsl.torch.op("def act(double(N) x, double(N) s) -> (y) { y(i) = tanh(x(i) + s(i)) }")
    assert f.saved_inputs == [] and f.saved_outputs == [0]
    saved = []

    def pack(t):
        saved.append(t)
        return t
    x, s = randn(6), randn(6)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = f(x, s)
    assert len(saved) == 1 and saved[0] is y
    y.backward(torch.ones(6, dtype=torch.float64))
    want = 1 - torch.tanh(x.detach() + s.detach()) ** 2
    torch.testing.assert_close(x.grad, want)
    torch.testing.assert_close(s.grad, want)


def test_user_written_backward():
    src = "def scale(double(N) x, double(N) w) -> (y) { y(i) = x(i) * w(i) }"
    # a deliberately different (wrong) adjoint, to see that it is the one used
    bwd = """def scale_grad(double(N) x, double(N) w, double(N) y, double(N) d_y) -> (d_x, d_w) {
      d_x(i) = 3.0 * d_y(i)
      d_w(i) = d_y(i) * x(i)
    }"""
    f = tcdsl.torch.op(src, backward=bwd)
    x, w = randn(5), randn(5)
    f(x, w).sum().backward()
    torch.testing.assert_close(x.grad, torch.full((5,), 3.0, dtype=torch.float64))
    torch.testing.assert_close(w.grad, x.detach())
    assert f.saved_inputs == [0] and f.saved_outputs == []


def test_backward_with_a_wrong_signature_is_an_error():
    src = "def scale(double(N) x, double(N) w) -> (y) { y(i) = x(i) * w(i) }"
    bwd = "def scale_grad(double(N) x, double(N) w, double(N) d_y) -> (d_x) { d_x(i) = d_y(i) }"
    with pytest.raises(tcdsl.TcError, match="must take the forward's inputs"):
        tcdsl.torch.op(src, backward=bwd)


def test_float32_and_ops_are_cached():
    src = (ROOT / "examples" / "rnn" / "elman.tc").read_text()
    f = tcdsl.torch.op(src)
    assert tcdsl.torch.op(src) is f
    x, h0 = torch.randn(5, 2, 3), torch.randn(2, 4)
    i2h, h2h = (torch.randn(3, 4) * 0.5).requires_grad_(), (torch.randn(4, 4) * 0.5).requires_grad_()
    f(x, h0, i2h, h2h).sum().backward()
    i2h_ref, h2h_ref = i2h.detach().clone().requires_grad_(), h2h.detach().clone().requires_grad_()
    h, hs = h0, []
    for t in range(5):
        h = torch.tanh(h @ h2h_ref + x[t] @ i2h_ref)
        hs.append(h)
    torch.stack(hs).sum().backward()
    torch.testing.assert_close(i2h.grad, i2h_ref.grad, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(h2h.grad, h2h_ref.grad, atol=1e-5, rtol=1e-5)


def test_wrong_inputs_are_errors():
    f = tcdsl.torch.op(ELMAN)
    with pytest.raises(tcdsl.TcError, match="takes 4 inputs"):
        f(randn(2, 2, 2))
    with pytest.raises(tcdsl.TcShapeError):
        f(randn(4, 2, 3), randn(3, 5), randn(3, 5), randn(5, 5))


def test_integer_inputs_get_no_gradient():
    src, make = CASES["embedding"]
    f = tcdsl.torch.op(src)
    E, ids, w = make()
    y = f(E, ids, w)
    y.sum().backward()
    ref = torch.zeros_like(E)
    for n_ in range(ids.shape[0]):
        for l_ in range(ids.shape[1]):
            ref[ids[n_, l_]] += w.detach()
    torch.testing.assert_close(E.grad, ref)
    np.testing.assert_array_equal(ids.numpy(), [[0, 3, 3], [6, 1, 0]])


def test_torch_compile_with_fixed_sizes_and_sizes_solved_from_dims():
    """The shape-only (fake) implementation binds sizes as a call does: from
    ``sizes=`` of the compile (a free loop size) and from dims declared as
    an expression of a size (``double(4 * H, I) W``: H from W's rows)."""
    powers = """def powers(double(B) x0) -> (x) {
      for t in S { if t == 0 { x(t, b) = x0(b) } else { x(t, b) = x(t - 1, b) * x0(b) } }
    }"""
    f = tcdsl.torch.op(powers, sizes={"S": 3})
    x0 = randn(2)
    out = torch.compile(lambda a: f(a), fullgraph=True)(x0)
    torch.testing.assert_close(out, torch.stack([x0, x0 ** 2, x0 ** 3]).detach())
    src, make = CASES["stacked_gates"]
    g = tcdsl.torch.op(src)
    x, W = make()
    eager = g(x, W)
    compiled = torch.compile(lambda x, W: g(x, W), fullgraph=True)(x, W)
    assert compiled[1].shape == (3, 2)
    for c, e in zip(compiled, eager):
        torch.testing.assert_close(c, e)


def test_a_backward_returning_the_wrong_gradients_is_an_error():
    src = "def sq(double(N) x, double(N) w) -> (y) { y(i) = x(i) * x(i) * w(i) }"
    head = "def sq_grad(double(N) x, double(N) w, double(N) y, double(N) d_y) -> "
    with pytest.raises(tcdsl.TcError, match="output 'd_x' is float64 of 2 dimensions; the gradient of 'x' must be "
                                            "float64 of 1"):
        tcdsl.torch.op(src, backward=head + "(double(N, 2) d_x, d_w) { d_x(i, j) = d_y(i) where j in 0:2 \n"
                                            "d_w(i) = d_y(i) }")
    with pytest.raises(tcdsl.TcError, match="output 'd_w' is float32 of 1 dimensions; the gradient of 'w' must be "
                                            "float64"):
        tcdsl.torch.op(src, backward=head + "(d_x, float(N) d_w) { d_x(i) = d_y(i) \n d_w(i) = float(d_y(i)) }")
    f = tcdsl.torch.op(src, backward=head + "(d_x, d_w) { d_x(i) = i < N ? d_y(i) : 0.0 where i in 0:N+1 \n"
                                         "d_w(i) = d_y(i) }")
    x, w = randn(3), randn(3)
    with pytest.raises(tcdsl.TcShapeError, match=r"the gradient of 'x' has shape \(4,\), but 'x' has shape \(3,\)"):
        f(x, w).sum().backward()


def test_wrt_must_name_inputs():
    with pytest.raises(tcdsl.TcError, match="wrt: expected an input's name or a list of them, got 0"):
        tcdsl.gradient("def f(double(N) x) -> (y) { y(i) = x(i) * x(i) }", wrt=0)
