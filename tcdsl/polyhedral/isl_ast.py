"""The isl AST of each kernel: built from its schedule, and read.

``build_ast(model, schedules, fixed=None)`` is the stage entry point: each
schedule becomes an isl AST under the kernel's context (sizes >= 1, loop
variables in range, and the fixed sizes, if any, substituted after
scheduling).

The rest are the readers the code generators share, so that none of them
walks isl's node API by hand: a block's :func:`children`, a loop's
:func:`iterator`, the identifiers of an expression (:func:`ids`), the marks
above a node (:func:`strip_marks`), whether some node below satisfies a test
(:func:`has`), and a statement call's name and arguments.
"""
from __future__ import annotations

from typing import Callable

import islpy as isl

from .model import Model
from .schedule import PARALLEL, fixed_set

NT = isl.ast_node_type
OP = isl.ast_expr_op_type


def build_ast(model: Model, schedules: dict[int, isl.Schedule],
              fixed: dict[str, int] | None = None) -> dict[int, isl.AstNode]:
    """The isl AST of every kernel (see the module docstring)."""
    fix = fixed_set(model, fixed)
    out = {}
    for i, k in enumerate(model.kernels()):
        build = isl.AstBuild.from_context(k.context & fix.align_params(k.context.get_space()))
        out[i] = build.node_from_schedule(schedules[i])
    return out


# ------------------------------------------------------------------ nodes
def children(node: isl.AstNode) -> list[isl.AstNode]:
    """The nodes of a block, in order; any other node is a block of itself."""
    if node.get_type() != NT.block:
        return [node]
    ch = node.block_get_children()
    return [ch.get_at(i) for i in range(ch.n_ast_node())]


def below(node: isl.AstNode) -> list[isl.AstNode]:
    """The nodes directly below ``node``: a loop's body, a mark's node, an
    ``if``'s branches, a block's children (none below a statement)."""
    t = node.get_type()
    if t == NT.for_:
        return [node.for_get_body()]
    if t == NT.mark:
        return [node.mark_get_node()]
    if t == NT.if_:
        return [node.if_get_then_node()] + ([node.if_get_else_node()] if node.if_has_else_node() else [])
    if t == NT.block:
        return children(node)
    return []


def has(node: isl.AstNode, test: Callable[[isl.AstNode], bool]) -> bool:
    """``test`` holds for ``node`` or some node below it."""
    return test(node) or any(has(x, test) for x in below(node))


def is_loop(node: isl.AstNode) -> bool:
    return node.get_type() == NT.for_


def is_parallel_mark(node: isl.AstNode) -> bool:
    return node.get_type() == NT.mark and mark(node) == PARALLEL


def mark(node: isl.AstNode) -> str:
    """The name of a mark node (``par``, ``seq``, ``par_steps``)."""
    return node.mark_get_id().get_name()


def strip_marks(node: isl.AstNode) -> tuple[isl.AstNode, str | None]:
    """The node under the marks above it, and the innermost mark's name (None: no mark)."""
    found = None
    while node.get_type() == NT.mark:
        found = mark(node)
        node = node.mark_get_node()
    return node, found


# ------------------------------------------------------------------ loops
def iterator(loop: isl.AstNode) -> str:
    """The name of an isl ``for``'s iterator (``c0``)."""
    return loop.for_get_iterator().get_id().get_name()


def unit_stride(loop: isl.AstNode) -> bool:
    inc = loop.for_get_inc()
    return inc.get_type() == isl.ast_expr_type.int and inc.get_val().to_python() == 1


def loop_ids(loop: isl.AstNode) -> set[str]:
    """The identifiers in a loop's bounds."""
    return ids(loop.for_get_init()) | ids(loop.for_get_cond())


# ------------------------------------------------------------ expressions
def ids(e: isl.AstExpr) -> set[str]:
    """The identifiers (iterators and parameters) in an isl AST expression."""
    t = e.get_type()
    if t == isl.ast_expr_type.id:
        return {e.get_id().get_name()}
    if t == isl.ast_expr_type.op:
        return set().union(*(ids(x) for x in args(e)))
    return set()


def args(e: isl.AstExpr) -> list[isl.AstExpr]:
    """The arguments of an operation (for a call, the callee first)."""
    return [e.get_op_arg(i) for i in range(e.get_op_n_arg())]


def statement(call: isl.AstExpr) -> str:
    """The statement a user node's call runs (``S0`` of ``S0(c0, c1)``)."""
    return call.get_op_arg(0).get_id().get_name()


def parts(node: isl.AstNode) -> list[isl.AstNode]:
    """The nodes that run one after the other at ``node``: the children of the
    block under its marks, and of their blocks, in order (each with its own
    marks); ``node`` itself when it is no block."""
    bare, _ = strip_marks(node)
    if bare.get_type() == NT.block:
        return [p for x in children(bare) for p in parts(x)]
    return [node]
