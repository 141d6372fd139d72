"""Loop-invariant statements hoisted out of sequential loops (polyhedral/hoist.py).

Each program is compiled with hoisting (the default) and without, and both
are compared with NumPy or with the reference interpreter (tcdsl.testing),
which runs the program as written; the tests also say which statements moved.
"""
from __future__ import annotations

import numpy as np
import pytest

import tcdsl
from tcdsl.syntax import nodes as n
from tcdsl.testing import evaluate

from helpers import QRNN, qrnn_inputs, rand, reference

NO_HOIST = {"hoist": False}
HOIST = {"hoist": True}  # the default
AUTO = {"hoist": "auto"}  # both programs, chosen by the rows of a step: see the tests at the end


def hoisted(kernel) -> list[str]:
    """The tensors written by statements before the first loop of the compiled program."""
    out = []
    for s in kernel.frontend.checked.node.body:
        if isinstance(s, n.For):
            break
        if isinstance(s, n.Comprehension):
            out.append(s.tensor)
    return out


def loop_body(kernel) -> list[str]:
    loops = [s for s in kernel.frontend.checked.node.body if isinstance(s, n.For)]
    return [c.tensor for c in n.walk(loops[0]) if isinstance(c, n.Comprehension)] if loops else []


def assert_same(src, inputs, entry=None, **kw):
    """Hoisted, not hoisted and ``hoist="auto"`` agree with the interpreter;
    returns the hoisted kernel."""
    want = evaluate(src, inputs, entry)
    want = want if isinstance(want, tuple) else (want,)
    kernels = [tcdsl.compile(src, entry, options=o, **kw) for o in (HOIST, NO_HOIST, AUTO)]
    for k in kernels:
        got = k(*inputs)
        got = got if isinstance(got, tuple) else (got,)
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.dtype == w.dtype
            np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5)
    return kernels[0]


# ------------------------------------------------------------- hoisted
RNN_PROJ = """
def rnn(float(T,B,I) x, float(B,H) h0, float(I,H) Wx, float(H,H) Wh) -> (h) {
  for t in T {
    xw(b, j) +=! x(t, b, i) * Wx(i, j)
    if t == 0 { h(t, b, j) +=! h0(b, k) * Wh(k, j) }
    else      { h(t, b, j) +=! h(t - 1, b, k) * Wh(k, j) }
    h(t, b, j) = tanh(h(t, b, j) + xw(b, j))
  }
}"""


def _rnn_numpy(x, h0, Wx, Wh):
    h, out = h0.astype(np.float64), []
    for t in range(x.shape[0]):
        h = np.tanh(h @ Wh + x[t].astype(np.float64) @ Wx)
        out.append(h)
    return np.stack(out)


@pytest.mark.parametrize("T,B,I,H", [(5, 3, 7, 9), (1, 1, 1, 1), (17, 4, 16, 33)])
def test_input_projection_runs_for_all_steps_before_the_loop(T, B, I, H):
    rng = np.random.default_rng(T)
    inputs = [rand(rng, T, B, I), rand(rng, B, H), rand(rng, I, H), rand(rng, H, H)]
    k = tcdsl.compile(RNN_PROJ, options=HOIST)
    # xw expanded to xw(t, b, j) and computed before the loop; h(0) reads only
    # inputs but stays: `if t == 0` is no step at all when T = 0, and the
    # code generated for sizes >= 1 could not express that as a range
    assert hoisted(k) == ["xw"]
    assert k.frontend.checked.tensors["xw"].rank == 3
    assert loop_body(k) == ["h", "h", "h"]
    np.testing.assert_allclose(k(*inputs), _rnn_numpy(*inputs), rtol=1e-4, atol=1e-5)
    assert_same(RNN_PROJ, inputs)


def test_qrnn_gates_are_hoisted_and_expanded():
    k = tcdsl.compile(QRNN, options=HOIST)
    # the gates for t >= 1; those of t == 0 (see above) and what reads them stay
    assert hoisted(k) == ["z", "f", "o"]
    assert [k.frontend.checked.tensors[g].rank for g in "zfo"] == [3, 3, 3]
    assert loop_body(k) == ["z", "f", "o", "z", "f", "o", "cell", "cell", "h"]
    for T, B, C, H in [(7, 3, 5, 6), (1, 2, 3, 4), (2, 1, 1, 1)]:
        inputs = qrnn_inputs(np.random.default_rng(T), T, B, C, H)
        for got, want in zip(k(*inputs), reference.qrnn(*inputs)):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_hoisting_keeps_every_specialization_mode_and_options_object():
    rng = np.random.default_rng(3)
    inputs = [rand(rng, 6, 2, 5), rand(rng, 2, 4), rand(rng, 5, 4), rand(rng, 4, 4)]
    want = _rnn_numpy(*inputs)
    for mode in ("never", "after-scheduling", "before-scheduling"):
        for o in (AUTO, HOIST):
            np.testing.assert_allclose(tcdsl.compile(RNN_PROJ, specialize=mode, options=o)(*inputs), want,
                                       rtol=1e-4, atol=1e-5)
    k = tcdsl.compile(RNN_PROJ, options=tcdsl.MappingOptions(hoist=False))
    assert hoisted(k) == [] and "xw" in loop_body(k)
    np.testing.assert_allclose(k(*inputs), want, rtol=1e-4, atol=1e-5)


def test_hoisting_out_of_the_inner_of_two_loops():
    src = """
    def layers(float(L,T,B,I) x, float(L,I,H) W, float(H,H) U) -> (h) {
      for l in L {
        for t in T {
          p(b, j) +=! x(l, t, b, i) * W(l, i, j)
          if t == 0 { h(l, t, b, j) = p(b, j) }
          else      { h(l, t, b, j) +=! h(l, t - 1, b, k) * U(k, j) }
        }
      }
    }"""
    rng = np.random.default_rng(5)
    inputs = [rand(rng, 2, 4, 3, 5), rand(rng, 2, 5, 6), rand(rng, 6, 6)]
    k = assert_same(src, inputs)
    outer = [s for s in k.frontend.checked.node.body if isinstance(s, n.For)]
    # p moved out of `for t` only
    assert len(outer) == 1 and [type(s).__name__ for s in outer[0].body] == ["Comprehension", "For"]
    assert outer[0].body[0].tensor == "p"


# ------------------------------------------------------- kept in the loop
@pytest.mark.parametrize("name, src", [
    # reads what the loop writes at the step before (a recurrence)
    ("recurrence", """
    def f(float(T,N) x, float(N,N) W) -> (y) {
      for t in T {
        if t == 0 { y(t, j) = x(t, j) }
        else      { y(t, j) +=! y(t - 1, k) * W(k, j) }
      }
    }"""),
    # reads X(t) before the statement writing it (so reads 0): hoisting would change that
    ("anti-dependence", """
    def f(float(T,N) x, float(N,N) W) -> (r, X) {
      for t in T {
        r(t, j) = 2 * X(t, j) where j in 0:N
        X(t, j) +=! x(t, k) * W(k, j)
      }
    }"""),
    # runs on every other step: not one interval of t
    ("not an interval", """
    def f(float(T,N) x, float(N,N) W) -> (y) {
      for t in T {
        if t % 2 == 0 { y(t, j) +=! x(t, k) * W(k, j) }
      }
    }"""),
    # accumulates into the same element at every step
    ("across steps", """
    def f(float(T,N) x, float(N,N) W) -> (acc) {
      for t in T {
        acc(j) += x(t, k) * W(k, j)
      }
    }"""),
    # the temporary carries a value from one step to the next
    ("carried temporary", """
    def f(float(T,N) x, float(N,N) W) -> (y) {
      for t in T {
        if t == 0 { s(j) +=! x(t, k) * W(k, j) }
        y(t, j) = s(j) + x(t, j)
      }
    }"""),
])
def test_statements_that_must_stay_in_the_loop(name, src):
    rng = np.random.default_rng(7)
    inputs = [rand(rng, 6, 5), rand(rng, 5, 5)]
    k = assert_same(src, inputs)
    # across steps: the statement stays, but its products do not depend on
    # the loop: their sum per step moves out (polyhedral/accumulate.py)
    assert hoisted(k) == (["acc_in"] if name == "across steps" else []), name


@pytest.mark.slow
def test_a_statement_before_its_hoisted_neighbour_keeps_the_loop():
    # y reads xw at the same step, after it: xw moves, y stays
    src = """
    def f(float(T,B,N) x, float(N,N) W) -> (y) {
      for t in T {
        xw(b, j) +=! x(t, b, k) * W(k, j)
        if t == 0 { y(t, b, j) = xw(b, j) }
        else      { y(t, b, j) = xw(b, j) + 0.5 * y(t - 1, b, j) }
      }
    }"""
    rng = np.random.default_rng(11)
    k = assert_same(src, [rand(rng, 5, 3, 4), rand(rng, 4, 4)])
    assert hoisted(k) == ["xw"] and loop_body(k) == ["y", "y"]


def test_an_index_variable_named_like_a_loop_variable_elsewhere():
    # the loop variable t is a parameter of the polyhedral model; the index
    # variable t of the other statements is renamed internally
    src = """
    def f(float(T,N) x) -> (y, z, w) {
      y(t, j) +=! x(t, k) * x(j, k)
      for t in T { z(t, j) = y(t, j) + 1 }
      w(j) +=! z(t, j)
    }"""
    x = rand(np.random.default_rng(2), 4, 3)
    y, z, w = tcdsl.compile(src)(x)
    np.testing.assert_allclose(y, x @ x.T, rtol=1e-5)
    np.testing.assert_allclose(z, x @ x.T + 1, rtol=1e-5)
    np.testing.assert_allclose(w, (x @ x.T + 1).sum(0), rtol=1e-5)


def test_cli_option(tmp_path, capsys):
    from tcdsl.cli import main

    path = tmp_path / "rnn.tc"
    path.write_text(RNN_PROJ)
    assert main(["compile", str(path), "--emit", "ast"]) == 0
    with_hoist = capsys.readouterr().out
    assert main(["compile", str(path), "--emit", "ast", "--options", "hoist=false"]) == 0
    without = capsys.readouterr().out
    assert with_hoist != without and "t_1" in with_hoist and "t_1" not in without
    with pytest.raises(tcdsl.TcError, match="hoist"):
        tcdsl.compile(RNN_PROJ, options={"hoist": "yes"})
    assert main(["compile", str(path), "--emit", "ast", "--options", "hoist=auto"]) == 0


MORE = {
    # x read backwards
    "reverse": ("""def f(float(T,B,I) x, float(I,H) W, float(H,H) U) -> (h) {
      for t in T {
        p(b, j) +=! x(T - 1 - t, b, i) * W(i, j)
        if t == 0 { h(t, b, j) = tanh(p(b, j)) }
        else { h(t, b, j) = tanh(p(b, j) + h(t - 1, b, j)) }
      }
    }""", [(5, 3, 4), (4, 6), (6, 6)], ["p"]),
    # a where-range on the reduction
    "where": ("""def f(float(T,N) x, float(N,N) W) -> (y) {
      for t in T {
        q(j) +=! x(t, k) * W(k, j) where k in 0:2
        y(t, j) = q(j) + (t == 0 ? 0 : y(t - 1, j))
      }
    }""", [(5, 4), (4, 4)], ["q"]),
    # an embedding lookup: an indirect read (a may-read of all of E)
    "lookup": ("""def f(float(V,H) E, int32(T,B) tok, float(H,H) W) -> (h) {
      for t in T {
        e(b, j) +=! E(tok(t, b), k) * W(k, j)
        if t == 0 { h(t, b, j) = e(b, j) }
        else { h(t, b, j) = e(b, j) + h(t - 1, b, j) }
      }
    }""", [(7, 4), "tok", (4, 4)], ["E_g", "e"]),  # (the hoisted sum reads its rows gathered once: gather.py)
    # t in the middle of the left-hand side; the whole body moves
    "t in the middle": ("""def f(float(T,B,I) x, float(I,H) W) -> (xw, h) {
      for t in T {
        xw(b, t, j) +=! x(t, b, i) * W(i, j)
        h(t, b) +=! xw(b, t, j)
      }
    }""", [(5, 3, 4), (4, 6)], ["xw", "h"]),
    # two loops, each entirely hoisted
    "two loops": ("""def f(float(T,N) x, float(N,N) W) -> (y, z) {
      for t in T { y(t, j) +=! x(t, k) * W(k, j) }
      for t in T { z(t, j) +=! y(t, k) * W(k, j) }
    }""", [(5, 4), (4, 4)], ["y", "z"]),
    # `for t in 1:T`: a loop that runs no step (T = 1) keeps the other
    # dimensions of what it writes, h is (0, B, H) in the loop as when
    # hoisted (test_ranges), so the rewrite keeps the shapes
    "loop from 1": ("""def f(float(T,B,I) x, float(I,H) W) -> (h) {
      for t in 1:T {
        p(b, j) +=! x(t, b, i) * W(i, j) + x(t - 1, b, i) * W(i, j)
        h(t, b, j) = p(b, j) * 2
      }
    }""", [(5, 3, 4), (4, 6)], ["p", "h"]),
}


@pytest.mark.parametrize("name", MORE)
@pytest.mark.slow
def test_more_programs(name):
    src, shapes, moved = MORE[name]
    rng = np.random.default_rng(13)
    inputs = [rng.integers(0, 7, (5, 3)).astype(np.int32) if s == "tok" else rand(rng, *s) for s in shapes]
    k = assert_same(src, inputs)
    assert hoisted(k) == moved
    if name == "loop from 1":  # no step: (0, B, H) hoisted or not
        assert_same(src, [rand(rng, 1, 3, 4), rand(rng, 4, 6)])


def test_a_failure_inside_hoisting_keeps_the_original_program(monkeypatch):
    import islpy as isl

    from tcdsl.polyhedral import hoist

    def broken(model):
        raise isl.Error("simulated")
    monkeypatch.setattr(hoist, "plan", broken)
    rng = np.random.default_rng(17)
    inputs = [rand(rng, 4, 2, 3), rand(rng, 2, 5), rand(rng, 3, 5), rand(rng, 5, 5)]
    k = tcdsl.compile(RNN_PROJ, options={"disk_cache": False})
    assert hoisted(k) == [] and "xw" in loop_body(k)
    np.testing.assert_allclose(k(*inputs), _rnn_numpy(*inputs), rtol=1e-4, atol=1e-5)


# ------------------------------------------------ chosen by the rows of a step
def _threshold() -> int:
    from tcdsl import driver

    return driver.rows_threshold()


def test_auto_keeps_both_programs_and_runs_each_on_its_side():
    """``hoist="auto"`` on the CPU: ``if B >= R { as written } else { hoisted
    }``, R a full register tile of rows for every thread; the hoisted
    branch's temporaries renamed.  Both sides of R give the NumPy result, and
    so does every specialization mode (which hoist)."""
    R = _threshold()
    k = tcdsl.compile(RNN_PROJ, options=AUTO)
    (top,) = k.frontend.checked.node.body
    assert isinstance(top, n.If)
    assert top.cond.op == ">=" and top.cond.lhs.name == "B" and top.cond.rhs.value == R
    assert [c.tensor for c in n.walk(top.orelse[0]) if isinstance(c, n.Comprehension)] == ["xw_hoisted"]
    assert f"if B >= {R}:" in k.script
    for B in (1, R - 1, R, R + 3):
        rng = np.random.default_rng(B)
        inputs = [rand(rng, 4, B, 5), rand(rng, B, 6), rand(rng, 5, 6), rand(rng, 6, 6)]
        want = _rnn_numpy(*inputs)
        # the specialized binaries (a compile per size) on each side of R
        for mode in ("never",) + (("after-scheduling", "before-scheduling") if B in (R - 1, R) else ()):
            np.testing.assert_allclose(tcdsl.compile(RNN_PROJ, specialize=mode, options=AUTO)(*inputs), want,
                                       rtol=1e-4, atol=1e-5)
    assert hoisted(tcdsl.compile(RNN_PROJ, specialize="after-scheduling", options=AUTO)) == ["xw"]


def test_auto_with_the_rows_known_keeps_one_program():
    """Rows fixed by the program (a declared batch): one program, hoisted
    only below R."""
    R = _threshold()
    for B, moved in ((R, []), (max(1, R // 4), ["xw"])):
        src = RNN_PROJ.replace("float(T,B,I) x, float(B,H) h0", f"float(T,{B},I) x, float({B},H) h0")
        k = tcdsl.compile(src, options=AUTO)
        assert not isinstance(k.frontend.checked.node.body[0], n.If)
        assert hoisted(k) == moved, B
        rng = np.random.default_rng(B)
        inputs = [rand(rng, 3, B, 4), rand(rng, B, 5), rand(rng, 4, 5), rand(rng, 5, 5)]
        np.testing.assert_allclose(k(*inputs), _rnn_numpy(*inputs), rtol=1e-4, atol=1e-5)


def test_auto_runs_the_steps_inside_the_parallel_loop_in_both_branches():
    """Each branch's recurrence still runs inside its parallel loop (the
    condition over the sizes is tested once, outside it): no parallel region
    per step."""
    import re

    k = tcdsl.compile(RNN_PROJ, options=AUTO)
    steps, parallel = 0, None
    for line in k.script.splitlines():
        indent = len(line) - len(line.lstrip())
        if line.strip().startswith("if B"):
            parallel = None
        elif "T.parallel(" in line:
            parallel = indent
        elif re.match(r"\s*for t(, | in )", line):
            steps += 1
            assert parallel is not None and indent > parallel, line
    assert steps == 2


def test_hoisted_on_the_gpu():
    """A GPU launches a kernel per step: the hoisted program, whatever the rows."""
    k = tcdsl.compile(RNN_PROJ, target="cuda", options=AUTO)
    assert hoisted(k) == ["xw"]


# ------------------------------------------------------------- where the step index goes
RNN_BATCH_FIRST = RNN_PROJ.replace("float(T,B,I) x", "float(B,T,I) x").replace("x(t, b, i)", "x(b, t, i)")


def _indices_of(kernel, tensor: str) -> list[str]:
    c = next(s for s in kernel.frontend.checked.node.body if isinstance(s, n.Comprehension) and s.tensor == tensor)
    return [getattr(i, "name", "?") for i in c.indices]


def test_the_step_index_goes_where_the_operand_has_it():
    # x(t, b, i): xw(t_1, b, j), so the hoisted product's loops over t_1 and b
    # run as one loop over T * B rows of x (codegen/collapse.py)
    k = tcdsl.compile(RNN_PROJ, options={**HOIST, "disk_cache": False})
    assert _indices_of(k, "xw") == ["t_1", "b", "j"]
    assert "x_rows = T.decl_buffer((T_1 * B, I_1), data=x.data)" in k.script
    # batch first, x(b, t, i): xw(b, t_1, j), rows of x again adjacent in order
    kb = tcdsl.compile(RNN_BATCH_FIRST, options={**HOIST, "disk_cache": False})
    assert _indices_of(kb, "xw") == ["b", "t_1", "j"]
    assert "x_rows = T.decl_buffer((B * T_1, I_1), data=x.data)" in kb.script
    rng = np.random.default_rng(4)
    for T, B, I, H in [(5, 3, 7, 9), (1, 1, 1, 1), (9, 2, 16, 33)]:
        x, h0, Wx, Wh = rand(rng, T, B, I), rand(rng, B, H), rand(rng, I, H), rand(rng, H, H)
        want = _rnn_numpy(x, h0, Wx, Wh)
        np.testing.assert_allclose(k(x, h0, Wx, Wh), want, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(kb(np.ascontiguousarray(x.transpose(1, 0, 2)), h0, Wx, Wh), want,
                                   rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------- reads that only sizes refused at the call leave
# One (I, G) matrix for the three gates, sliced at H + j and 2 * H + j: the
# reads of a(b, 2 * H + j) have no source where G < 3 * H, sizes that a call
# refuses (a read out of bounds); the input projection is hoisted all the same.
GRU_SLICED = """def gru(float(T,B,I) x, float(I,G) W, float(H,G) U, float(G) bias) -> (h) {
  for t in T {
    a(b, c) +=! x(t, b, i) * W(i, c)
    if t == 0 { r(b, c) = 0.0 where b in 0:B, c in 0:G } else { r(b, c) +=! h(t - 1, b, k) * U(k, c) }
    z(b, j) = sigmoid(a(b, H + j) + r(b, H + j) + bias(H + j)) where j in 0:H
    nn(b, j) = tanh(a(b, 2 * H + j) + bias(2 * H + j) + sigmoid(a(b, j) + r(b, j) + bias(j)) * r(b, 2 * H + j)) where j in 0:H
    if t == 0 { h(t, b, j) = (1 - z(b, j)) * nn(b, j) }
    else { h(t, b, j) = (1 - z(b, j)) * nn(b, j) + z(b, j) * h(t - 1, b, j) }
  }
}"""


def _gru_sliced(x, W, U, bias):
    x, W, U, bias = (v.astype(np.float64) for v in (x, W, U, bias))
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    T, B, _ = x.shape
    H = U.shape[0]
    h, out = np.zeros((B, H)), []
    for t in range(T):
        a, r = x[t] @ W, (h @ U if t else np.zeros((B, W.shape[1])))
        z = sig(a[:, H:2 * H] + r[:, H:2 * H] + bias[H:2 * H])
        nn = np.tanh(a[:, 2 * H:3 * H] + bias[2 * H:3 * H] + sig(a[:, :H] + r[:, :H] + bias[:H]) * r[:, 2 * H:3 * H])
        h = (1 - z) * nn + z * h
        out.append(h)
    return np.stack(out)


@pytest.mark.slow
def test_a_projection_read_in_slices_is_hoisted():
    k = tcdsl.compile(GRU_SLICED, options={**HOIST, "disk_cache": False})
    assert hoisted(k) == ["a"]
    assert "a = T.alloc_buffer((T_1, B, G)" in k.script
    rng = np.random.default_rng(6)
    for mode in ("never", "after-scheduling", "before-scheduling"):
        km = tcdsl.compile(GRU_SLICED, specialize=mode, options={"disk_cache": False})
        for T, B, I, H, G in [(4, 3, 5, 7, 21), (1, 1, 1, 1, 3), (3, 9, 17, 16, 50)]:
            args = [rand(rng, T, B, I), rand(rng, I, G), rand(rng, H, G), rand(rng, 1, G)[0]]
            np.testing.assert_allclose(km(*args), _gru_sliced(*args), rtol=1e-4, atol=1e-5)
        with pytest.raises(tcdsl.TcError, match="out of bounds"):
            km(rand(rng, 2, 2, 3), rand(rng, 3, 8), rand(rng, 3, 8), rand(rng, 1, 8)[0])  # G = 8 < 3 * H
