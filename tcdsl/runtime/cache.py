"""The on-disk cache of compiled kernels.

Each entry is a shared library exported by TVM plus a small JSON file::

    <dir>/<key>.json              what the entry is: key fields, function name,
                                  size parameters, the sizes fixed in it, the
                                  def's signature (runtime/signature.py),
                                  library file name, sha256
    <dir>/<key>-<sha256[:16]>.so  the library, named by its content

``<key>`` is the sha256 of the key fields, everything that decides the
generated code (the compiler makes them: ``dispatch.key_fields``).  An entry
holds what it takes to call the library, so :func:`load_entry` serves one to
the runtime alone (``runtime.kernel.load``).  Both files are written to a temporary name in the same
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

import hashlib
import json
import os
import re
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..errors import TcError

# Bump when the entry layout or the meaning of a key field changes.
FORMAT = 2

_KEY = re.compile(r"^[0-9a-f]{64}$")
_ENTRY_FILE = re.compile(r"^([0-9a-f]{64})(?:\.json|-[0-9a-f]{16}\.so)$")
_TEMP_FILE = re.compile(r"^\.tmp-[0-9a-f]{64}-")


class TcCacheWarning(RuntimeWarning):
    """A disk cache entry was unusable (it is deleted and rebuilt) or could not be written."""


class TcCacheError(TcError):
    """An entry given to :func:`load_entry` is not a usable kernel."""


def cache_dir() -> Path:
    d = os.environ.get("TCDSL_CACHE_DIR")
    if d:
        return Path(d).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tcdsl"


def enabled(disk_cache: bool = True) -> bool:
    """Off with the kernel option ``{"disk_cache": False}`` (``disk_cache``) or
    ``TCDSL_DISK_CACHE=0`` (also ``false``, ``no``, ``off``)."""
    if not disk_cache:
        return False
    return os.environ.get("TCDSL_DISK_CACHE", "1").strip().lower() not in ("0", "false", "no", "off")


def key_of(key_fields: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(key_fields, sort_keys=True).encode()).hexdigest()


@dataclass
class Loaded:
    """A binary read back from the cache."""

    module: Any  # tvm.runtime.Module
    function: str
    size_params: tuple[str, ...]
    fixed: dict[str, int]  # the sizes that are constants in it
    signature: dict[str, Any]  # runtime/signature.py, as JSON
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
        if meta["key"] != key or meta["fields"] != key_fields:
            raise ValueError("its key fields do not match")
        return _loaded(meta, d)
    except Exception as e:  # noqa: BLE001 -- any unusable entry is rebuilt, never fatal
        _warn(f"disk cache entry {meta_path} is unusable ({type(e).__name__}: {e}); deleted, rebuilding")
        remove(key, d)
        return None


def load_entry(meta_path: str | os.PathLike) -> Loaded:
    """The entry whose JSON file is ``meta_path``, checked (its key is the hash
    of its fields, its library has its checksum); a ``TcCacheError`` says
    why an entry is unusable."""
    meta_path = Path(meta_path)
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if meta["key"] != meta_path.stem or key_of(meta["fields"]) != meta["key"]:
            raise ValueError("its key is not the hash of its fields")
        return _loaded(meta, meta_path.parent)
    except Exception as e:  # noqa: BLE001
        raise TcCacheError(f"{meta_path}: not a usable tcdsl kernel ({type(e).__name__}: {e})") from None


def _loaded(meta: dict[str, Any], d: Path) -> Loaded:
    lib = d / meta["library"]
    if lib.parent != d:
        raise ValueError("its library is outside the cache directory")
    data = lib.read_bytes()
    if len(data) != meta["bytes"] or hashlib.sha256(data).hexdigest() != meta["sha256"]:
        raise ValueError(f"{lib.name} is corrupt or truncated (checksum mismatch)")
    import tvm

    module = tvm.runtime.load_module(str(lib))
    module[meta["function"]]  # raises when the function is not there
    return Loaded(module, meta["function"], tuple(meta["size_params"]), dict(meta["fixed"]), meta["signature"], lib)


def store(key: str, key_fields: dict[str, Any], export: Callable[[str], None], function: str, size_params,
          fixed: dict[str, int], signature: dict[str, Any], directory: Path | None = None) -> Path | None:
    """The entry for ``key``: ``export(path)`` writes the library; ``function``
    takes the sizes ``size_params``, then the buffers of ``signature``
    (``fixed``: the sizes that are constants in it).  Returns the library
    path, or None (with a warning) when it could not be written."""
    d = directory or cache_dir()
    tmp_lib = tmp_meta = None
    try:
        d.mkdir(parents=True, exist_ok=True)
        tag = f".tmp-{key}-{os.getpid()}-"
        fd, tmp_lib = tempfile.mkstemp(prefix=tag, suffix=".so", dir=d)
        os.close(fd)
        export(tmp_lib)
        with open(tmp_lib, "rb") as f:
            data = f.read()
            os.fsync(f.fileno())
        digest = hashlib.sha256(data).hexdigest()
        lib = d / f"{key}-{digest[:16]}.so"
        meta = {"key": key, "fields": key_fields, "function": function, "size_params": list(size_params),
                "fixed": dict(fixed), "signature": signature, "library": lib.name, "bytes": len(data), "sha256": digest, "created": time.time()}
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


def load_library(path: Path):
    """The module of a library :func:`store` has just written, or None when
    it cannot be loaded (removed meanwhile by another process's eviction):
    the caller then uses its in-memory build."""
    import tvm

    try:
        return tvm.runtime.load_module(str(path))
    except Exception as e:  # noqa: BLE001 -- the in-memory build serves instead
        _warn(f"cannot load {path} back ({type(e).__name__}: {e}); using the in-memory build")
        return None


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
