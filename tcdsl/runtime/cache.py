"""The on-disk cache of compiled kernels.

Each entry is a shared library exported by TVM plus a small JSON file::

    <dir>/<key>.json              what the entry is: key fields, function name,
                                  size parameters, library file name, sha256
    <dir>/<key>-<sha256[:16]>.so  the library, named by its content

``<key>`` is the sha256 of everything that decides the generated code (see
:func:`fields`).  Both files are written to a temporary name in the same
directory and moved into place with ``os.replace``, the library first: a
reader sees a whole entry or none, and two processes storing the same entry
at once both succeed (the last JSON written wins and names a library that
exists with the content it describes).  An entry whose JSON does not parse,
whose library is missing, has another checksum or does not load is deleted
and reported with a :class:`TcCacheWarning`; the caller rebuilds it.

``TCDSL_CACHE_DIR`` chooses the directory (default: ``$XDG_CACHE_HOME/tcdsl``,
else ``~/.cache/tcdsl``); ``TCDSL_DISK_CACHE=0`` or the kernel option
``{"disk_cache": False}`` switches the cache off.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Bump when the entry layout or the meaning of a key field changes.
FORMAT = 1

# Kernel options that change how a kernel is run, not the code it is made of.
RUNTIME_OPTIONS = frozenset({"disk_cache", "auto_threshold", "auto_payback"})

_KEY = re.compile(r"^[0-9a-f]{64}$")
_ENTRY_FILE = re.compile(r"^([0-9a-f]{64})(?:\.json|-[0-9a-f]{16}\.so)$")
_TEMP_FILE = re.compile(r"^\.tmp-[0-9a-f]{64}-")


class TcCacheWarning(RuntimeWarning):
    """A disk cache entry was unusable (it is deleted and rebuilt) or could not be written."""


def cache_dir() -> Path:
    d = os.environ.get("TCDSL_CACHE_DIR")
    if d:
        return Path(d).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tcdsl"


def enabled(options: dict | None = None) -> bool:
    """Off with ``{"disk_cache": False}`` or ``TCDSL_DISK_CACHE=0`` (also ``false``, ``no``, ``off``)."""
    if options is not None and not options.get("disk_cache", True):
        return False
    return os.environ.get("TCDSL_DISK_CACHE", "1").strip().lower() not in ("0", "false", "no", "off")


@functools.cache
def compiler_fingerprint() -> str:
    """sha256 of tcdsl's own source files: a change to the compiler makes new
    keys even when ``tcdsl.__version__`` stays the same (a development tree)."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.py")):
        if "__pycache__" in p.parts:
            continue
        h.update(p.relative_to(root).as_posix().encode() + b"\0")
        h.update(p.read_bytes() + b"\0")
    return h.hexdigest()


def fields(*, program: str, entry: str, pipeline: str, fixed: dict[str, int], sizes: dict[str, int] | None,
           target: str, options: dict | None = None) -> dict[str, Any]:
    """The key fields of one binary.  ``program`` is the normalised text of the
    ``def`` (``to_tc``), ``pipeline`` the order of stages that made it
    (``never``, ``after-scheduling`` or ``before-scheduling``; ``auto`` makes
    the same binaries as ``never`` and ``after-scheduling`` and shares their
    entries), ``fixed`` the sizes fixed at compile time (``sizes=``) and
    ``sizes`` the size tuple of a per-size binary (None for the symbolic one)."""
    import tvm

    from .. import __version__

    code_options = {k: v for k, v in (options or {}).items() if k not in RUNTIME_OPTIONS}
    return {
        "format": FORMAT,
        "program": program,
        "entry": entry,
        "pipeline": pipeline,
        "fixed": {k: int(v) for k, v in sorted(fixed.items())},
        "sizes": None if sizes is None else {k: int(v) for k, v in sorted(sizes.items())},
        "options": json.loads(json.dumps(code_options, sort_keys=True, default=repr)),
        "target": target,
        "tcdsl": __version__,
        "tvm": tvm.__version__,
        "compiler": compiler_fingerprint(),
    }


def key_of(key_fields: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(key_fields, sort_keys=True).encode()).hexdigest()


@dataclass
class Loaded:
    """A binary read back from the cache."""

    module: Any  # tvm.runtime.Module
    function: str
    size_params: tuple[str, ...]
    path: Path


def load(key: str, key_fields: dict[str, Any], directory: Path | None = None) -> Loaded | None:
    """The entry for ``key``, or None when there is none or it was unusable (then it is deleted)."""
    d = directory or cache_dir()
    meta_path = d / f"{key}.json"
    try:
        meta_text = meta_path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        _warn(f"cannot read {meta_path} ({e}); compiling instead")
        return None
    try:
        meta = json.loads(meta_text)
        lib = d / meta["library"]
        if meta["key"] != key or meta["fields"] != key_fields or lib.parent != d:
            raise ValueError("its key fields do not match")
        data = lib.read_bytes()
        if len(data) != meta["bytes"] or hashlib.sha256(data).hexdigest() != meta["sha256"]:
            raise ValueError(f"{lib.name} is corrupt or truncated (checksum mismatch)")
        import tvm

        module = tvm.runtime.load_module(str(lib))
        module[meta["function"]]  # raises when the function is not there
        return Loaded(module, meta["function"], tuple(meta["size_params"]), lib)
    except Exception as e:  # noqa: BLE001 -- any unusable entry is rebuilt, never fatal
        _warn(f"disk cache entry {meta_path} is unusable ({type(e).__name__}: {e}); deleted, rebuilding")
        remove(key, d)
        return None


def store(key: str, key_fields: dict[str, Any], executable, function: str, size_params,
          directory: Path | None = None) -> Path | None:
    """Export ``executable`` as the entry for ``key``; returns the library path,
    or None (with a warning) when it could not be written."""
    d = directory or cache_dir()
    tmp_lib = tmp_meta = None
    try:
        d.mkdir(parents=True, exist_ok=True)
        tag = f".tmp-{key}-{os.getpid()}-"
        fd, tmp_lib = tempfile.mkstemp(prefix=tag, suffix=".so", dir=d)
        os.close(fd)
        from ..codegen import targets

        with targets._build_lock:  # export re-enters LLVM code generation
            executable.export_library(tmp_lib)
        with open(tmp_lib, "rb") as f:
            data = f.read()
            os.fsync(f.fileno())
        digest = hashlib.sha256(data).hexdigest()
        lib = d / f"{key}-{digest[:16]}.so"
        meta = {"key": key, "fields": key_fields, "function": function, "size_params": list(size_params),
                "library": lib.name, "bytes": len(data), "sha256": digest, "created": time.time()}
        fd, tmp_meta = tempfile.mkstemp(prefix=tag, suffix=".json", dir=d)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(meta, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp_lib, lib)
        tmp_lib = None
        os.replace(tmp_meta, d / f"{key}.json")
        tmp_meta = None
        return lib
    except Exception as e:  # noqa: BLE001 -- a cache that cannot be written is not fatal
        _warn(f"cannot write the disk cache entry {key[:16]} in {d} ({type(e).__name__}: {e})")
        return None
    finally:
        for p in (tmp_lib, tmp_meta):
            if p is not None:
                _unlink(Path(p))


def remove(key: str, directory: Path | None = None) -> None:
    d = directory or cache_dir()
    _unlink(d / f"{key}.json")
    for lib in d.glob(f"{key}-*.so"):
        _unlink(lib)


def _files(d: Path):
    try:
        return [p for p in d.iterdir() if p.is_file() and (_ENTRY_FILE.match(p.name) or _TEMP_FILE.match(p.name))]
    except FileNotFoundError:
        return []


def info(directory: Path | None = None) -> dict[str, Any]:
    """Directory, number of entries, total size in bytes of tcdsl's files there."""
    d = directory or cache_dir()
    files = _files(d)
    size = 0
    for p in files:
        try:
            size += p.stat().st_size
        except FileNotFoundError:
            pass
    entries = sum(1 for p in files if p.suffix == ".json" and _KEY.match(p.stem))
    return {"directory": str(d), "entries": entries, "bytes": size, "enabled": enabled()}


def clear(directory: Path | None = None) -> int:
    """Delete tcdsl's files (entries and leftover temporaries; nothing else) and
    return the number of entries removed."""
    d = directory or cache_dir()
    files = _files(d)
    entries = sum(1 for p in files if p.suffix == ".json" and _KEY.match(p.stem))
    for p in files:
        _unlink(p)
    return entries


def _unlink(p: Path) -> None:
    try:
        p.unlink()
    except FileNotFoundError:
        pass
    except OSError as e:
        _warn(f"cannot delete {p} ({e})")


def _warn(message: str) -> None:
    warnings.warn(f"tcdsl: {message}", TcCacheWarning, stacklevel=3)
