"""tcdsl kernels as PyTorch operators: ``tcdsl.torch.op``.

    f = tcdsl.torch.op(source, entry=None, *, backward=None, **compile_kwargs)
    y = f(x, h0, Wi, Wh)            # torch tensors; y.sum().backward() works

The forward kernel and its adjoint (``tcdsl.gradient``, or the ``def`` given
as ``backward=``, TC's ``training=True``) are registered with
``torch.library`` as two custom operators, each with a fake implementation
that infers output shapes from input shapes (the range inference of the
program), so the op works in ``nn.Module``s, under ``torch.autograd``
(``gradcheck`` in float64) and under ``torch.compile`` without a graph
break.  The autograd context keeps only the forward inputs and outputs that
the adjoint reads; for the others it keeps their shapes.

The adjoint is compiled at the first backward, with the same
``compile_kwargs`` as the forward.
"""
from __future__ import annotations

import hashlib
import os
import threading
import warnings
from typing import Any

import torch

from .errors import TcError, TcShapeError
from .sema import types as ty
from .sema.check import check
from .sema.ranges import infer_ranges
from .source import Source
from .syntax import nodes as n
from .syntax.parse import parse

__all__ = ["op", "TcOp"]

_LOCK = threading.Lock()
_OPS: dict[str, "TcOp"] = {}


def op(source: str | os.PathLike, entry: str | None = None, *, backward: str | os.PathLike | None = None,
       **compile_kwargs) -> "TcOp":
    """A PyTorch operator computing ``entry`` of ``source`` (see the module
    docstring).  ``backward``: TC text (or a path) holding the adjoint def,
    ``def <name>(<inputs>, <outputs>, d_<output>...) -> (d_<input> for every
    floating-point input)``; by default :func:`tcdsl.gradient` derives it.
    ``compile_kwargs`` go to :func:`tcdsl.compile` (``target``, ``options``,
    ``specialize``, ...).  Ops are cached: the same arguments give the same op."""
    src = Source.load(source)
    bwd = Source.load(backward) if backward is not None else None
    key = repr((src.text, entry, bwd.text if bwd else None, sorted(compile_kwargs.items(), key=lambda kv: kv[0])))
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    with _LOCK:
        if digest not in _OPS:
            _OPS[digest] = TcOp(src, entry, bwd, compile_kwargs, digest)
        return _OPS[digest]


class _Sig:
    """What the torch side needs of a def: names, dtypes, output shapes as functions of input shapes."""

    def __init__(self, source: Source, entry: str | None, fixed: dict[str, int] | None = None):
        self.fixed = dict(fixed or {})  # sizes= of the compile
        program = parse(source)
        self.checked = check(program, entry)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.ranges = infer_ranges(self.checked)
        c = self.checked
        self.name = c.node.name
        self.inputs = c.inputs
        self.outputs = c.outputs
        self.in_dtypes = [c.tensors[x].dtype for x in self.inputs]
        self.out_dtypes = [c.tensors[x].dtype for x in self.outputs]
        self.out_extents = [self.ranges.extent_exprs(o) for o in self.outputs]

    def sizes(self, shapes) -> dict[str, Any]:
        """The sizes of input ``shapes`` (Python or symbolic ints): from dims
        that are size names, the ``sizes=`` of the compile, and dims that are
        expressions of one size yet unknown (``4 * H``: ``H`` is the dim's
        extent divided by 4), as the kernel's call binds them (its checks
        are the kernel's)."""
        out: dict[str, Any] = dict(self.fixed)
        linear = []
        for p, shape in zip(self.checked.node.params, shapes):
            for d, s in zip(p.type.dims, shape):
                if isinstance(d, str):
                    out.setdefault(d, s)
                elif not isinstance(d, int):
                    linear.append((n.linear(d), s))
        solved = True
        while solved:
            solved = False
            for lin, s in linear:
                unknown = [v for v in lin or {} if v != 1 and v not in out]
                if len(unknown) == 1:
                    v = unknown[0]
                    rest = sum((c * (1 if u == 1 else out[u]) for u, c in lin.items() if u != v), 0)
                    out[v], solved = (s - rest) // lin[v], True
        return out

    def out_shapes(self, shapes) -> list[tuple]:
        sizes = self.sizes(shapes)
        return [tuple(torch.sym_max(_eval(e, sizes), 0) for e in ext) for ext in self.out_extents]


def _eval(e: n.Expr, s: dict[str, Any]):
    """A size expression on Python or symbolic ints (torch.compile's shapes)."""
    match e:
        case n.Const(value=v):
            return int(v)
        case n.SizeVar(name=v) | n.IndexVar(name=v):
            return s[v]
        case n.Unary(op="-", operand=x):
            return -_eval(x, s)
        case n.Unary(op="!", operand=x):
            return not _eval(x, s)
        case n.Select(cond=c, then=a, other=b):
            return _eval(a, s) if _eval(c, s) else _eval(b, s)
        case n.Binary(op=op, lhs=a, rhs=b):
            x, y = _eval(a, s), _eval(b, s)
            match op:
                case "+": return x + y
                case "-": return x - y
                case "*": return x * y
                case "/": return x // y
                case "%": return x % y
                case "min": return torch.sym_min(x, y)
                case "max": return torch.sym_max(x, y)
                case "==": return x == y
                case "!=": return x != y
                case "<": return x < y
                case "<=": return x <= y
                case ">": return x > y
                case ">=": return x >= y
                case "&&": return bool(x) and bool(y)
                case "||": return bool(x) or bool(y)
    raise TcError(f"cannot evaluate the size expression {e!r}")


def _torch_dtype(dtype: str):
    return getattr(torch, dtype)


class TcOp:
    """A tcdsl kernel as a PyTorch operator (made by :func:`op`)."""

    def __init__(self, source: Source, entry: str | None, backward: Source | None, compile_kwargs: dict,
                 digest: str):
        from . import compile as tc_compile
        from .autodiff import gradient

        self.source = source
        self.compile_kwargs = dict(compile_kwargs)
        self.sig = _Sig(source, entry, compile_kwargs.get("sizes"))
        self.entry = self.sig.name
        self.kernel = tc_compile(source.text if source.name == "<string>" else source.name, self.entry,
                                 **compile_kwargs)
        if not self.sig.inputs:
            raise TcError(f"'{self.entry}' has no inputs; a PyTorch operator needs at least one tensor")
        self.diff = [k for k, dt in enumerate(self.sig.in_dtypes) if ty.is_float(dt)]
        if backward is None:
            self.backward_text = gradient(source, self.entry)
            bentry = None
            self.backward_source = Source(self.backward_text, f"<adjoint of {self.entry}>")
        else:
            self.backward_source = backward
            bentry = self._backward_entry(backward)
            self.backward_text = backward.text
        self.bsig = _Sig(self.backward_source, bentry, compile_kwargs.get("sizes"))
        self._check_backward()
        self._bkernel = None
        reads = {x.tensor for x in n.walk(self.bsig.checked.node) if isinstance(x, n.Access)}
        n_in, n_out = len(self.sig.inputs), len(self.sig.outputs)
        self.saved_inputs = [k for k in range(n_in) if self.bsig.inputs[k] in reads]
        self.saved_outputs = [k for k in range(n_out) if self.bsig.inputs[n_in + k] in reads]
        self.name = f"{self.entry}_{digest}"
        self._register()

    # ------------------------------------------------------------ the adjoint
    def _backward_entry(self, src: Source) -> str:
        defs = parse(src).defs
        if len(defs) == 1:
            return defs[0].name
        for d in defs:
            if d.name == f"{self.entry}_grad":
                return d.name
        raise TcError(f"backward: the source defines {', '.join(d.name for d in defs)}; "
                      f"name the adjoint '{self.entry}_grad'")

    def _check_backward(self) -> None:
        s, b = self.sig, self.bsig
        want = list(s.inputs) + list(s.outputs) + [f"d_{o}" for o in s.outputs]
        if len(b.inputs) != len(want):
            raise TcError(f"backward '{b.name}' takes {len(b.inputs)} inputs; it must take the forward's inputs, "
                          f"its outputs and one gradient per output: ({', '.join(want)})")
        for k, x in enumerate(b.inputs[:len(s.inputs)]):
            if b.in_dtypes[k] != s.in_dtypes[k]:
                raise TcError(f"backward '{b.name}': input '{x}' is {b.in_dtypes[k]}, the forward's "
                              f"'{s.inputs[k]}' is {s.in_dtypes[k]}")
        if len(b.outputs) != len(self.diff):
            names = ", ".join(f"d_{s.inputs[k]}" for k in self.diff)
            raise TcError(f"backward '{b.name}' returns {len(b.outputs)} tensors; it must return one gradient per "
                          f"floating-point input: ({names})")
        for j, k in enumerate(self.diff):
            if b.out_dtypes[j] != s.in_dtypes[k] or len(b.out_extents[j]) != len(s.checked.node.params[k].type.dims):
                raise TcError(f"backward '{b.name}': output '{b.outputs[j]}' is {b.out_dtypes[j]} of "
                              f"{len(b.out_extents[j])} dimensions; the gradient of '{s.inputs[k]}' must be "
                              f"{s.in_dtypes[k]} of {len(s.checked.node.params[k].type.dims)}, as '{s.inputs[k]}' is")

    @property
    def backward_kernel(self):
        """The compiled adjoint (compiled at the first backward)."""
        if self._bkernel is None:
            from . import compile as tc_compile

            with warnings.catch_warnings():
                # an output whose extent is computed gets a size of its own in the
                # adjoint; isl cannot see it equals the forward's
                warnings.filterwarnings("ignore", message=".*may be read out of bounds.*")
                self._bkernel = tc_compile(self.backward_text, self.bsig.name, **self.compile_kwargs)
        return self._bkernel

    # ------------------------------------------------------------ registration
    def _register(self) -> None:
        n_in, n_out = len(self.sig.inputs), len(self.sig.outputs)
        args = ", ".join(f"Tensor a{k}" for k in range(n_in))
        rets = "Tensor" if n_out == 1 else "(" + ", ".join("Tensor" for _ in range(n_out)) + ")"
        fwd = torch.library.custom_op(f"tcdsl::{self.name}", self._forward_impl, mutates_args=(),
                                      schema=f"({args}) -> {rets}")
        fwd.register_fake(self._forward_fake)
        n_b = len(self.bsig.inputs)
        bargs = ", ".join(f"Tensor b{k}" for k in range(n_b))
        n_d = len(self.diff)
        brets = "Tensor" if n_d == 1 else "(" + ", ".join("Tensor" for _ in range(n_d)) + ")"
        bwd = torch.library.custom_op(f"tcdsl::{self.name}_backward", self._backward_impl, mutates_args=(),
                                      schema=f"({bargs}) -> {brets}")
        bwd.register_fake(self._backward_fake)
        fwd.register_autograd(self._backward, setup_context=self._setup_context)
        self._fwd_op, self._bwd_op = fwd, bwd

    def __call__(self, *inputs):
        if len(inputs) != len(self.sig.inputs):
            raise TcError(f"'{self.entry}' takes {len(self.sig.inputs)} inputs ({', '.join(self.sig.inputs)}), "
                          f"got {len(inputs)}")
        return self._fwd_op(*inputs)

    def __repr__(self) -> str:
        return f"tcdsl.torch.op({self.entry}: {', '.join(self.sig.inputs)} -> {', '.join(self.sig.outputs)})"

    # ------------------------------------------------------------ implementations
    def _forward_impl(self, *inputs):
        return self.kernel(*[x.contiguous() for x in inputs])

    def _forward_fake(self, *inputs):
        shapes = self.sig.out_shapes([tuple(x.shape) for x in inputs])
        outs = tuple(inputs[0].new_empty(s, dtype=_torch_dtype(dt)) for s, dt in zip(shapes, self.sig.out_dtypes))
        return outs[0] if len(outs) == 1 else outs

    def _backward_impl(self, *args):
        return self.backward_kernel(*[x.contiguous() for x in args])

    def _backward_fake(self, *args):
        outs = tuple(torch.empty_like(args[k], memory_format=torch.contiguous_format) for k in self.diff)
        return outs[0] if len(outs) == 1 else outs

    def _setup_context(self, ctx, inputs, output):
        outputs = output if isinstance(output, tuple) else (output,)
        ctx.meta = ([(tuple(x.shape), x.dtype, x.device) for x in inputs],
                    [(tuple(y.shape), y.dtype, y.device) for y in outputs])
        ctx.save_for_backward(*[inputs[k] for k in self.saved_inputs], *[outputs[k] for k in self.saved_outputs])

    def _backward(self, ctx, *grads):
        saved = list(ctx.saved_tensors)
        in_meta, out_meta = ctx.meta
        ins = [None] * len(in_meta)
        outs = [None] * len(out_meta)
        for k in self.saved_inputs:
            ins[k] = saved.pop(0)
        for k in self.saved_outputs:
            outs[k] = saved.pop(0)
        # tensors the adjoint does not read still give it their sizes
        ins = [x if x is not None else torch.empty(s, dtype=dt, device=dev) for x, (s, dt, dev) in zip(ins, in_meta)]
        outs = [y if y is not None else torch.empty(s, dtype=dt, device=dev) for y, (s, dt, dev) in zip(outs, out_meta)]
        gs = [g if g is not None else torch.zeros(s, dtype=dt, device=dev) for g, (s, dt, dev) in zip(grads, out_meta)]
        result = self._bwd_op(*ins, *outs, *gs)
        result = result if isinstance(result, tuple) else (result,)
        out: list = [None] * len(in_meta)
        for k, r in zip(self.diff, result):
            if tuple(r.shape) != tuple(in_meta[k][0]):
                raise TcShapeError(f"backward '{self.bsig.name}': the gradient of '{self.sig.inputs[k]}' has shape "
                                   f"{tuple(r.shape)}, but '{self.sig.inputs[k]}' has shape {tuple(in_meta[k][0])}")
            out[k] = r
        return tuple(out)

