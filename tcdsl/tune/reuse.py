"""Options from the tuning database for ``tcdsl.compile(..., options=None)``.

For a size tuple, in this order:

1. **tuned**: the fastest options measured at exactly these sizes (the most
   recent tuning run that measured them) -- origin ``"tuned at T=64,B=32"``;
2. **dispatch**: the choice of the dispatch rule of the most recent
   shape-generic run (``tune/workload.py``) -- ``"dispatched by the rule of the
   workload tuned at T=64,B=32; T=128,B=32"``;
3. **reused**: the options tuned at the nearest tuned size tuple (distance
   between the logarithms of the sizes) -- ``"reused from T=64,B=32"``;
4. ``"defaults"``.

Options change the code, and a kernel with ``specialize="never"`` has one
binary for every size: it takes the options of the workload's dominant size
(the largest weight of the last shape-generic run), else of the most
recently tuned size tuple, and ``options_for`` says so for every size.  The
specialised modes build each size tuple's binary with that size's options;
the frontend's options (``hoist``) and, under ``after-scheduling``, the shared
schedule's (``fusion``) stay the kernel's own.
"""
from __future__ import annotations

import functools
import hashlib
import math
import os
from dataclasses import dataclass

from ..errors import TcError
from ..runtime.args import with_derived
from .database import Database, Key, sizes_text

# Options that are decided before the per-size stages (the frontend's), and
# those of the schedule shared by after-scheduling's binaries.
FRONTEND_OPTIONS = ("hoist", "gather", "transpose", "pad", "inplace", "factor", "chain", "strict_bounds")
SCHEDULE_OPTIONS = ("fusion", "split_selects")


def format_sizes(sizes: dict[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in sizes.items())


@functools.cache
def host_cpu() -> str:
    """The host CPU as the database keys on it: LLVM's name, the model, the cores."""
    from ..host import cpu as llvm_cpu

    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        import platform

        model = platform.processor()
    return f"{llvm_cpu()}; {model}; {os.cpu_count()} cores"


def program_key(fe, target_kind: str) -> Key:
    """The database key of a frontend's program (its ``def`` as written, normalised)."""
    from ..sema.check import select_def
    from ..syntax.printer import to_tc

    text = to_tc(select_def(fe.program, fe.name))
    return Key(hashlib.sha256(text.encode()).hexdigest(), fe.name, target_kind, host_cpu())


@dataclass(frozen=True)
class Choice:
    options: dict
    origin: str
    at: dict[str, int] | None = None  # the tuned sizes the options come from


class Tuned:
    """What the database holds for one program, read once (at compile time)."""

    def __init__(self, db: Database, key: Key, names: tuple[str, ...] = ()):
        self.db, self.key, self.names = db, key, tuple(names)
        self.best = db.best(key)  # sizes text -> (options, seconds)
        self.workload = db.workload(key)
        self._tuned_sizes = [r.sizes for r in db.records(key, ok_only=True)]  # in order of measurement

    @classmethod
    def load(cls, tuning_db, fe, target_kind: str) -> "Tuned | None":
        """None when there is no database or nothing in it for this program."""
        if tuning_db is False:
            return None
        if tuning_db is None or tuning_db is True:
            db = Database()
        elif isinstance(tuning_db, Database):
            db = tuning_db
        elif isinstance(tuning_db, (str, os.PathLike)):
            db = Database(tuning_db)
        else:
            raise TcError(f"tuning_db: expected a path, None or False, got {type(tuning_db).__name__}")
        if not db.exists():
            return None
        try:
            t = cls(db, program_key(fe, target_kind), tuple(fe.checked.sizes))
        except TcError as e:  # an unreadable database: the kernel still compiles, with the defaults
            import warnings

            warnings.warn(f"tcdsl: {e}; using the default options", RuntimeWarning, stacklevel=4)
            return None
        return t if t.best or t.workload else None

    def _ordered(self, sizes: dict[str, int]) -> dict[str, int]:
        """``sizes`` in the def's order (the database keeps them sorted by name)."""
        return {**{k: sizes[k] for k in self.names if k in sizes}, **sizes}

    def for_sizes(self, sizes: dict[str, int]) -> Choice:
        """The options of one size tuple (see the module docstring)."""
        sizes = self._ordered(sizes)
        hit = self.best.get(sizes_text(sizes))
        if hit is not None:
            return Choice(dict(hit[0]), f"tuned at {format_sizes(sizes)}", dict(sizes))
        w = self.workload
        if w is not None and w.option_sets:
            from .workload import dispatch

            i = dispatch(w.rule, sizes)
            tuned = "; ".join(format_sizes(self._ordered(s)) for s in w.sizes)
            return Choice(dict(w.option_sets[i]), f"dispatched by the rule of the workload tuned at {tuned}")
        near = self._nearest(sizes)
        if near is not None:
            near = self._ordered(near)
            return Choice(dict(self.best[sizes_text(near)][0]), f"reused from {format_sizes(near)}", near)
        return Choice({}, "defaults")

    def for_symbolic(self) -> Choice:
        """The options of the one binary of ``specialize="never"``."""
        w = self.workload
        if w is not None and w.sizes:
            dominant = self._ordered(w.sizes[max(range(len(w.sizes)), key=lambda i: w.weights[i])])
            if sizes_text(dominant) in self.best:
                return self.for_sizes(dominant)
            from .workload import dispatch

            i = dispatch(w.rule, dominant)
            return Choice(dict(w.option_sets[i]), f"tuned for the workload's dominant size {format_sizes(dominant)}",
                          dominant)
        if self._tuned_sizes:
            return self.for_sizes(self._tuned_sizes[-1])  # the most recently tuned
        return Choice({}, "defaults")

    def _nearest(self, sizes: dict[str, int]) -> dict[str, int] | None:
        import json

        best, best_d = None, math.inf
        for text in self.best:
            tuned = json.loads(text)
            common = [k for k in sizes if k in tuned]
            if not common:
                continue
            d = sum((math.log2(sizes[k] + 1) - math.log2(tuned[k] + 1)) ** 2 for k in common)
            if d < best_d:
                best, best_d = tuned, d
        return best


def options_for(kernel, sizes: dict[str, int]) -> tuple:
    """``Kernel.options_for``: the options a call with ``sizes`` runs with, and why."""
    from ..options import MappingOptions

    names = kernel.frontend.checked.sizes
    unknown = [k for k in sizes if k not in names]
    if unknown:
        raise TcError(f"options_for: {', '.join(map(repr, unknown))} {'is not a size' if len(unknown) == 1 else 'are not sizes'}"
                      f" of '{kernel.frontend.name}' (sizes: {', '.join(names)})")
    full = {**kernel.fixed, **{k: int(v) for k, v in sizes.items()}}
    full = with_derived(kernel.signature.derived, full)  # (G_x_G of G * G: computed, not given)
    missing = [k for k in names if k not in full]
    if missing:
        raise TcError(f"options_for: {', '.join(missing)} missing; give every size")
    full = {k: full[k] for k in names}
    tuned: Tuned | None = kernel._tuned
    if tuned is None:
        return MappingOptions.from_dict(kernel.options.to_dict()), kernel._options_origin
    if kernel.specialize == "never":
        c = kernel._symbolic_choice
        if c.at is not None and c.at != full and c.origin.startswith("tuned at"):
            return MappingOptions.from_dict(c.options), f"reused from {format_sizes(c.at)}"
        return MappingOptions.from_dict(c.options), c.origin
    return MappingOptions.from_dict(per_size_options(kernel, full)), tuned.for_sizes(full).origin


def per_size_options(kernel, sizes: dict[str, int]) -> dict:
    """The options of a specialised binary for ``sizes`` (see the module docstring)."""
    own = kernel.options.to_dict()
    chosen = dict(kernel._tuned.for_sizes(sizes).options)
    keep = FRONTEND_OPTIONS + (SCHEDULE_OPTIONS if kernel.specialize in ("after-scheduling", "auto") else ())
    for k in keep:
        chosen.pop(k, None)
        if k in own:
            chosen[k] = own[k]
    return chosen

