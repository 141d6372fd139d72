"""``tcdsl.compile``: the public entry point."""
from __future__ import annotations

import os
from typing import Any

from .source import Source
from . import driver
from .options import MappingOptions, parse as parse_options
from .dispatch import Kernel


def compile(source: str | os.PathLike, entry: str | None = None, *, target: Any = "llvm",
            specialize: str = "never", sizes: dict[str, int] | None = None,
            options: dict | MappingOptions | None = None) -> Kernel:
    """Compile the ``def`` named ``entry`` of ``source`` (TC text or a path to a
    ``.tc`` file) for ``target`` ("llvm" or "cuda").

    ``specialize`` chooses when sizes become constants: ``"never"`` (one
    symbolic kernel for every size), ``"after-scheduling"``,
    ``"before-scheduling"`` (a binary per size tuple, cached) or ``"auto"``
    (symbolic at once, specialised in the background for sizes seen often).
    ``sizes`` fixes some sizes at compile time.  Raises :class:`TcError`
    subclasses for bad programs.  ``options`` is a dict or a
    :class:`tcdsl.MappingOptions` (see docs/api.md)."""
    options = parse_options(options)
    fe = driver.frontend(Source.load(source), entry, options.frontend)
    return Kernel(fe, target=target, specialize=specialize, sizes=sizes, options=options)
