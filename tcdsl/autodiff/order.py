"""Program order over statement instances, for the adjoint's questions:
is the value a statement reads still there at the end of the program (then
the adjoint reads the forward output instead of recomputing it), was an
element written before (then its adjoint must be reset), and so on.

Every statement instance gets a time stamp: the positions of its enclosing
items in their blocks, interleaved with the values of the enclosing loops'
variables (and 0/1 for the branch of an ``if``), padded with zeros.  The
loop variables, parameters in :mod:`tcdsl.sema.ranges`, become dimensions
here, so that isl can compare instances of different steps.  Reads whose
indices isl cannot express (indirect, non-affine) count as reads of the
whole dimension: the answers are conservative.
"""
from __future__ import annotations

import islpy as isl

from ..sema.affine import NotAffine, isl_name, params_prefix, to_isl
from ..sema.ranges import RangeInfo, StmtInfo
from ..syntax import nodes as n


class Order:
    def __init__(self, ranges: RangeInfo):
        self.ranges = ranges
        self.ctx = ranges.ctx
        self.sizes = tuple(ranges.checked.sizes)
        self.stmts: list[StmtInfo] = ranges.stmts
        self.skeleton: list[list] = []
        self._walk(ranges.checked.node.body, [])
        self.width = max((len(s) for s in self.skeleton), default=1)
        self.domains = [self._lifted(st) for st in self.stmts]
        self.scheds = [self._sched(k) for k in range(len(self.stmts))]
        self._writes: dict[int, isl.Map] = {}

    # ------------------------------------------------------------ building
    def _walk(self, stmts, prefix: list) -> None:
        for p, s in enumerate(stmts):
            match s:
                case n.Comprehension():
                    self.skeleton.append(prefix + [p])
                case n.For():
                    self._walk(s.body, prefix + [p, s.var])
                case n.If():
                    self._walk(s.then, prefix + [p, 0])
                    self._walk(s.orelse, prefix + [p, 1])

    def dims(self, k: int) -> list[str]:
        st = self.stmts[k]
        return [lp.var for lp in st.loops] + list(st.vars)

    def _lifted(self, st: StmtInfo) -> isl.Set:
        d = st.domain
        for j, lp in enumerate(st.loops):
            pos = d.find_dim_by_name(isl.dim_type.param, isl_name(lp.var))
            d = d.move_dims(isl.dim_type.set, j, isl.dim_type.param, pos, 1)
        for p in self.ranges.params:
            if p in self.sizes:
                continue
            pos = d.find_dim_by_name(isl.dim_type.param, isl_name(p))
            if pos >= 0:
                d = d.project_out(isl.dim_type.param, pos, 1)
        return d.set_tuple_name(f"S{st.id}")

    def _tuple(self, k: int) -> str:
        return f"S{k}[" + ", ".join(isl_name(v) for v in self.dims(k)) + "]"

    def _read(self, text: str, k: int) -> isl.Map:
        m = isl.Map.read_from_str(self.ctx, params_prefix(self.sizes) + "{ " + text + " }")
        dom = self.domains[k]
        m = m.align_params(dom.get_space().params())
        return m.intersect_domain(dom.align_params(m.get_space().params()))

    def _sched(self, k: int) -> isl.Map:
        stamp = [isl_name(x) if isinstance(x, str) else str(x) for x in self.skeleton[k]]
        stamp += ["0"] * (self.width - len(stamp))
        return self._read(self._tuple(k) + " -> [" + ", ".join(stamp) + "]", k)

    def access(self, k: int, tensor: str, indices) -> isl.Map:
        """Statement ``k``'s instances -> the elements of ``tensor`` at ``indices``
        (a dimension that isl cannot express is left free: all of it)."""
        outs = []
        for d, e in enumerate(indices):
            try:
                outs.append("(" + to_isl(e) + ")")
            except NotAffine:
                outs.append(f"o{d}_")
        text = self._tuple(k) + " -> " + isl_name(tensor) + "[" + ", ".join(outs) + "]"
        try:
            return self._read(text, k)
        except isl.Error:  # e.g. a product of variables that to_isl let through
            outs = [f"o{d}_" for d in range(len(indices))]
            return self._read(self._tuple(k) + " -> " + isl_name(tensor) + "[" + ", ".join(outs) + "]", k)

    def write(self, k: int) -> isl.Map:
        if k not in self._writes:
            c = self.stmts[k].comp
            self._writes[k] = self.access(k, c.tensor, c.indices)
        return self._writes[k]

    def writers(self, tensor: str) -> list[int]:
        return [st.id for st in self.stmts if st.comp.tensor == tensor]

    def readers(self, tensor: str) -> list[tuple[int, n.Access]]:
        out = []
        for st in self.stmts:
            for a in _reads(st.comp):
                if a.tensor == tensor:
                    out.append((st.id, a))
        return out

    # ----------------------------------------------------------- questions
    def _meets(self, k: int, acc: isl.Map, other: int, other_acc: isl.Map, relation: str) -> bool:
        """Some instance s of ``k`` and o of ``other`` touch one element and
        ``time(s) relation time(o)`` (relation: le, lt, gt)."""
        pairs = acc.apply_range(other_acc.reverse())
        if pairs.is_empty():
            return False
        a, b = self.scheds[k], self.scheds[other]
        order = {"le": a.lex_le_map, "lt": a.lex_lt_map, "gt": a.lex_gt_map}[relation](b)
        order = order.align_params(pairs.get_space().params())
        pairs = pairs.align_params(order.get_space().params())
        return not pairs.intersect(order).is_empty()

    def read_is_final(self, k: int, tensor: str, indices) -> bool:
        """No write at or after statement ``k`` (its own included) changes the
        elements it reads at ``indices``: their value then is their final value."""
        acc = self.access(k, tensor, indices)
        return not any(self._meets(k, acc, w, self.write(w), "le") for w in self.writers(tensor))

    def write_is_final(self, k: int) -> bool:
        """No later statement instance writes what statement ``k`` writes."""
        c = self.stmts[k].comp
        acc = self.write(k)
        return not any(self._meets(k, acc, w, self.write(w), "lt") for w in self.writers(c.tensor))

    def written_before(self, k: int, only=None) -> bool:
        """Some earlier instance (of the writers in ``only``, default all)
        wrote an element that statement ``k`` writes."""
        c = self.stmts[k].comp
        acc = self.write(k)
        ws = self.writers(c.tensor) if only is None else only
        return any(self._meets(k, acc, w, self.write(w), "gt") for w in ws)

    def read_before(self, k: int) -> bool:
        """Some earlier instance reads an element that statement ``k`` writes."""
        c = self.stmts[k].comp
        acc = self.write(k)
        for r, a in self.readers(c.tensor):
            if self._meets(k, acc, r, self.access(r, a.tensor, a.indices), "gt"):
                return True
        return False

    def disjoint(self, k: int, indices) -> bool:
        """Within one step, the elements statement ``k`` reads at ``indices``
        are none of those it writes."""
        st = self.stmts[k]
        c = st.comp
        w = _param_access(self, st, c.indices)
        r = _param_access(self, st, indices)
        if w is None or r is None:
            return False
        return w.intersect(r.align_params(w.get_space().params())).is_empty()


def _param_access(order: Order, st: StmtInfo, indices) -> isl.Set | None:
    """The elements ``st`` touches at ``indices`` in one step (loop variables as parameters)."""
    try:
        outs = ["(" + to_isl(e) + ")" for e in indices]
    except NotAffine:
        return None
    text = (params_prefix(order.ranges.params) + "{ [" + ", ".join(isl_name(v) for v in st.vars) + "] -> ["
            + ", ".join(outs) + "] }")
    try:
        m = isl.Map.read_from_str(order.ctx, text)
    except isl.Error:
        return None
    dom = st.domain.reset_tuple_id()
    m = m.align_params(dom.get_space().params())
    return m.intersect_domain(dom.align_params(m.get_space().params())).range()


def _reads(c: n.Comprehension) -> list[n.Access]:
    out = [x for x in n.walk(c.rhs) if isinstance(x, n.Access)]
    for w in c.wheres:
        if isinstance(w, n.Exists):
            out += [x for x in n.walk(w.expr) if isinstance(x, n.Access)]
    return out
