"""``tcdsl.compile``: the public entry point."""
from __future__ import annotations

import os
from typing import Any

from .errors import TcError
from .source import Source
from . import driver
from .options import MappingOptions, parse as parse_options
from .dispatch import Kernel


def compile(source: str | os.PathLike, entry: str | None = None, *, target: Any = "llvm",
            specialize: str = "never", sizes: dict[str, int] | None = None,
            options: dict | MappingOptions | None = None, tuning_db=None) -> Kernel:
    """Compile the ``def`` named ``entry`` of ``source`` (TC text or a path to a
    ``.tc`` file) for ``target`` ("llvm" or "cuda").

    ``specialize`` chooses when sizes become constants: ``"never"`` (one
    symbolic kernel for every size), ``"after-scheduling"``,
    ``"before-scheduling"`` (a binary per size tuple, cached) or ``"auto"``
    (symbolic at once, specialised in the background for sizes seen often).
    ``sizes`` fixes some sizes at compile time.  Raises :class:`TcError`
    subclasses for bad programs.  ``options`` is a dict or a
    :class:`tcdsl.MappingOptions` (see docs/api.md).

    With ``options=None`` the options come from the tuning database
    (``tuning_db``: a path, None for the default one, False for none; see
    docs/tuning.md and ``Kernel.options_for``)."""
    src = Source.load(source)
    if options is None and tuning_db is not False:
        return _tuned_kernel(src, entry, target=target, specialize=specialize, sizes=sizes, tuning_db=tuning_db)
    options = parse_options(options)
    fe = driver.frontend(src, entry, options.frontend, _kind(target), fixed=sizes, specialize=specialize)
    return Kernel(fe, target=target, specialize=specialize, sizes=sizes, options=options)


def _tuned_kernel(src: Source, entry: str | None, *, target, specialize: str, sizes, tuning_db) -> Kernel:
    """A kernel with the tuning database's options (tune/reuse.py): those of the
    symbolic binary; a specialised binary asks ``Kernel._options_at``."""
    from .codegen import targets
    from .tune.reuse import FRONTEND_OPTIONS, Tuned

    fe = driver.frontend(src, entry, target_kind=_kind(target), fixed=sizes, specialize=specialize)
    tuned = Tuned.load(tuning_db, fe, targets.target_kind(targets.make_target(target)))
    if tuned is None:
        return Kernel(fe, target=target, specialize=specialize, sizes=sizes, options={})
    choice = tuned.for_symbolic()
    if any(k in choice.options for k in FRONTEND_OPTIONS):
        fe = driver.frontend(src, entry, parse_options(choice.options).frontend, _kind(target), fixed=sizes,
                             specialize=specialize)
    k = Kernel(fe, target=target, specialize=specialize, sizes=sizes, options=choice.options, tuned=tuned)
    k._symbolic_choice = choice
    return k


def _kind(target) -> str:
    """``"llvm"`` or ``"cuda"`` (an unknown target is refused later, by the
    kernel); a target named by its string needs no TVM."""
    if isinstance(target, str):
        return "cuda" if target == "cuda" else "llvm"
    from .codegen import targets

    try:
        return targets.target_kind(targets.make_target(target))
    except TcError:
        return "llvm"
