"""The ``tcdsl`` command line: ``compile``, ``check``, ``run`` and ``cache``.

User errors print their located message on stderr and exit with 1; they
never print a traceback.  Anything else is a bug and keeps its traceback.
"""
from __future__ import annotations

import argparse
import sys

from .errors import TcError

EMIT_CHOICES = ("tir", "schedule", "ast", "isl-ast", "ranges", "llvm", "c", "cuda", "grad")


def _parse_sizes(text: str | None) -> dict[str, int]:
    if not text:
        return {}
    out = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip().lstrip("-").isdigit():
            raise TcError(f"--sizes: expected NAME=INT[,NAME=INT...], got '{item}'")
        out[name.strip()] = int(value)
    return out


def _parse_options(text: str | None) -> dict:
    """``--options``: a JSON object, or NAME=VALUE[,NAME=VALUE...] where a value
    is an integer, true/false or none (see tcdsl.MappingOptions)."""
    if not text:
        return {}
    import json

    if text.lstrip().startswith("{"):
        try:
            out = json.loads(text)
        except json.JSONDecodeError as e:
            raise TcError(f"--options: not a JSON object: {e.msg} at column {e.colno}") from None
        if not isinstance(out, dict):
            raise TcError("--options: expected a JSON object")
        return out
    out = {}
    for item in text.split(","):
        name, sep, value = (x.strip() for x in item.partition("="))
        if not sep or not name or not value:
            raise TcError(f"--options: expected NAME=VALUE[,NAME=VALUE...] or a JSON object, got '{item}'")
        low = value.lower()
        if low in ("true", "false"):
            out[name] = low == "true"
        elif low == "none":
            out[name] = None
        elif value.lstrip("-").isdigit():
            out[name] = int(value)
        else:
            raise TcError(f"--options: {name}: expected an integer, true, false or none, got '{value}'")
    return out


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tcdsl", description="Compile Tensor Comprehensions with loops to TVM.")
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("compile", help="compile a .tc file and print a stage of the result")
    c.add_argument("file")
    c.add_argument("--entry")
    c.add_argument("--target", default="llvm", choices=("llvm", "cuda"))
    c.add_argument("--specialize", default="never", choices=("never", "before-scheduling", "after-scheduling"))
    c.add_argument("--sizes", help="fix sizes, e.g. T=16,B=8")
    c.add_argument("--emit", default="tir", choices=EMIT_CHOICES)
    c.add_argument("--options", help="mapping and other options, e.g. tile_rows=4,steps_inside=false "
                                     "or a JSON object (see tcdsl.MappingOptions)")
    c.add_argument("-o", "--output", help="write to this file instead of stdout")
    k = sub.add_parser("check", help="parse and check a .tc file")
    k.add_argument("file")
    r = sub.add_parser("run", help="run on random inputs; print output shapes and checksums")
    r.add_argument("file")
    r.add_argument("--entry")
    r.add_argument("--sizes", required=True)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--options", help="as for compile")
    ca = sub.add_parser("cache", help="the on-disk cache of compiled kernels: 'info' or 'clear'")
    ca.add_argument("action", choices=("info", "clear"))
    ca.add_argument("--json", action="store_true", help="info as JSON")
    ca.set_defaults(file="tcdsl cache")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _COMMANDS[args.command](args)
    except TcError as e:
        print(f"error: {e}" if not str(e).startswith(args.file) else str(e), file=sys.stderr)
        return 1
    except OSError as e:
        print(f"error: {e.filename or args.file}: {e.strerror}", file=sys.stderr)
        return 1


def _load(path: str):
    from .source import Source

    with open(path, encoding="utf-8") as f:
        return Source(f.read(), path)


def _compile(args) -> int:
    from . import driver
    from .runtime.kernel import Kernel

    options = _parse_options(args.options)
    if args.emit == "grad":  # the adjoint as TC text (tcdsl.gradient)
        from .autodiff import gradient

        return _write(args, gradient(_load(args.file), args.entry))
    fe = driver.frontend_with(_load(args.file), args.entry, options)
    sizes = _parse_sizes(args.sizes)
    if args.emit in ("ast", "ranges"):
        text = driver.STAGES[args.emit](_FrontendOnly(fe))
    else:
        mode = "never" if args.specialize == "never" else args.specialize
        kernel = Kernel(fe, target=args.target, specialize="never" if mode == "never" else mode,
                        sizes=sizes if mode == "never" else {}, options=options)
        if mode != "never":
            if set(sizes) != set(fe.checked.sizes):
                missing = sorted(set(fe.checked.sizes) - set(sizes))
                raise TcError(f"--specialize {mode} needs every size in --sizes; missing: {', '.join(missing)}")
            text = driver.emit(kernel, args.emit, sizes)
        else:
            text = driver.emit(kernel, args.emit)
    return _write(args, text)


def _write(args, text: str) -> int:
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


class _FrontendOnly:
    def __init__(self, fe):
        self.frontend = fe


def _check(args) -> int:
    from . import driver
    from .syntax.parse import parse

    src = _load(args.file)
    names = [d.name for d in parse(src).defs]
    for name in names:
        driver.frontend(src, name, hoist=False)
    print(f"{args.file}: ok ({', '.join(names)})")
    return 0


def _run(args) -> int:
    import numpy as np

    from . import driver
    from .runtime.kernel import Kernel

    options = _parse_options(args.options)
    fe = driver.frontend_with(_load(args.file), args.entry, options)
    sizes = _parse_sizes(args.sizes)
    missing = [s for s in fe.checked.sizes if s not in sizes]
    if missing:
        raise TcError(f"--sizes is missing {', '.join(missing)}")
    unknown = [s for s in sizes if s not in fe.checked.sizes]
    if unknown:
        raise TcError(f"--sizes: {', '.join(unknown)} {'is not a size' if len(unknown) == 1 else 'are not sizes'} "
                      f"of '{fe.name}' (sizes: {', '.join(fe.checked.sizes)})")
    rng = np.random.default_rng(args.seed)
    inputs = []
    for p in fe.checked.node.params:
        shape = tuple(sizes[d] if isinstance(d, str) else d for d in p.type.dims)
        dtype = fe.checked.tensors[p.name].dtype
        if dtype.startswith(("int", "uint")):
            inputs.append(rng.integers(0, 4, shape).astype(dtype))
        elif dtype == "bool":
            inputs.append(rng.integers(0, 2, shape).astype(bool))
        else:
            inputs.append(rng.standard_normal(shape).astype(dtype))
    k = Kernel(fe, options=options)
    outs = k(*inputs)
    outs = outs if isinstance(outs, tuple) else (outs,)
    for name, o in zip(fe.checked.outputs, outs):
        print(f"{name}: shape {tuple(o.shape)} {o.dtype} sum {float(np.sum(o, dtype=np.float64)):.6g}")
    return 0


def _cache(args) -> int:
    """``tcdsl cache info``: directory, entries, total size; ``tcdsl cache clear``: delete the entries."""
    from .runtime import cache

    if args.action == "clear":
        d = cache.cache_dir()
        n = cache.clear(d)
        print(f"removed {n} entr{'y' if n == 1 else 'ies'} from {d}")
        return 0
    info = cache.info()
    if args.json:
        import json

        print(json.dumps(info))
        return 0
    print(f"directory: {info['directory']}")
    print(f"entries:   {info['entries']}")
    print(f"size:      {info['bytes'] / 1024:.1f} KiB ({info['bytes']} bytes)")
    print(f"enabled:   {'yes' if info['enabled'] else 'no (TCDSL_DISK_CACHE)'}")
    return 0


_COMMANDS = {"compile": _compile, "check": _check, "run": _run, "cache": _cache}

if __name__ == "__main__":
    sys.exit(main())
