"""The ``tcdsl`` command line: ``compile``, ``check``, ``run``, ``cache`` and ``tune``.

User errors print their located message on stderr and exit with 1; they
never print a traceback.  Anything else is a bug and keeps its traceback.
Warnings (a read that may be out of bounds) print as ``FILE:LINE:COL:
warning: ...`` with the line and carets, like errors.  On a terminal, a
compile that takes longer than a second says so on stderr.

TVM and PyTorch are imported only by the commands that generate code, so
``--help`` and ``check`` start quickly.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import threading
import time
import warnings

from . import __version__
from .errors import TcError

EMIT_CHOICES = ("tir", "schedule", "ast", "isl-ast", "ranges", "llvm", "c", "cuda", "grad")

# ``tcdsl run`` refuses sizes whose random inputs and outputs together would
# take more than this share of the machine's memory (before making any).
RUN_MEMORY_SHARE = 0.5
# A compile that takes longer than this many seconds prints a progress line.
PROGRESS_AFTER_S = 1.0


def _parse_sizes(text: str | None) -> dict[str, int]:
    if not text:
        return {}
    out = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name or not value.lstrip("-").isdigit():
            raise TcError(f"--sizes: expected NAME=INT[,NAME=INT...], got '{item}'")
        if name in out:
            raise TcError(f"--sizes: '{name}' is given twice ({name}={out[name]} and {name}={value})")
        if int(value) < 0:
            raise TcError(f"--sizes: {name}={value}: a size cannot be negative")
        if int(value) >= 2**31:
            raise TcError(f"--sizes: {name}={value} does not fit in an index: sizes are int32, at most {2**31 - 1}")
        out[name] = int(value)
    return out


def _seed(text: str) -> int:
    """``--seed``: a non-negative integer (NumPy's generators take no other)."""
    try:
        seed = int(text)
    except ValueError:
        seed = -1
    if seed < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return seed


def _parse_options(text: str | None) -> dict:
    """``--options``: a JSON object, or NAME=VALUE[,NAME=VALUE...] where a value
    is an integer, true/false or a word (fusion=outer, flatten=none; see tcdsl.MappingOptions)."""
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
        elif value.lstrip("-").isdigit():
            out[name] = int(value)
        else:
            out[name] = value  # a word (fusion=outer): the options' own check names the valid choices
    return out


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tcdsl", description="Compile Tensor Comprehensions with loops to TVM.")
    p.add_argument("--version", action="version", version=f"tcdsl {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    file_help = "the .tc source file"
    entry_help = "the def to use; needed when the file defines several"
    c = sub.add_parser("compile", help="compile a .tc file and print a stage of the result")
    c.add_argument("file", help=file_help)
    c.add_argument("--entry", help=entry_help)
    c.add_argument("--target", default="llvm", choices=("llvm", "cuda"),
                   help="llvm: the host CPU (default); cuda: NVIDIA GPUs (builds with nvcc, no GPU needed)")
    c.add_argument("--specialize", default="never", choices=("never", "before-scheduling", "after-scheduling"),
                   help="when sizes become constants (default never); the other two need every size in --sizes")
    c.add_argument("--sizes", help="fix sizes, e.g. T=16,B=8")
    c.add_argument("--emit", default="tir", choices=EMIT_CHOICES, help="the stage to print (default tir)")
    c.add_argument("--options", help="mapping and other options, e.g. tile_rows=4,steps_inside=false "
                                     "or a JSON object (see tcdsl.MappingOptions)")
    c.add_argument("-o", "--output", help="write to this file instead of stdout")
    k = sub.add_parser("check", help="parse and check a .tc file")
    k.add_argument("file", help=file_help)
    r = sub.add_parser("run", help="run on random inputs; print output shapes and checksums")
    r.add_argument("file", help=file_help)
    r.add_argument("--entry", help=entry_help)
    r.add_argument("--sizes", required=True, help="every size of the def, e.g. T=16,B=8")
    r.add_argument("--seed", type=_seed, default=0, help="seed of the random inputs (default 0)")
    r.add_argument("--options", help="as for compile")
    ca = sub.add_parser("cache", help="the on-disk cache of compiled kernels: 'info' or 'clear'")
    ca.add_argument("action", choices=("info", "clear"), help="info: where and how much; clear: delete every entry")
    ca.add_argument("--json", action="store_true", help="info as JSON")
    ca.set_defaults(file="tcdsl cache")
    from .tune import cli as tune_cli  # the tune subcommand (tcdsl/tune/cli.py)

    tune_cli.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        try:
            return _COMMANDS[args.command](args)
        except TcError as e:
            print(f"error: {e}" if not str(e).startswith(args.file) else str(e), file=sys.stderr)
            return 1
        except OSError as e:
            print(f"error: {e.filename or args.file}: {e.strerror}", file=sys.stderr)
            return 1


_LOCATED = re.compile(r"(?s)(.+?:\d+:\d+): (.*)")


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning as ``FILE:LINE:COL: warning: ...`` (the carets follow), or
    ``warning: ...`` when it names no place in the source."""
    text = str(message)
    located = _LOCATED.match(text)
    text = f"{located[1]}: warning: {located[2]}" if located else f"warning: {text}"
    print(text, file=sys.stderr if file is None else file)


class _Progress:
    """On a terminal (or with ``TCDSL_PROGRESS=1``; ``0`` turns it off), a
    line on stderr when ``what`` is still running after PROGRESS_AFTER_S
    seconds, and one with the time taken when it is done."""

    def __init__(self, what: str):
        self.what = what
        self.shown = False
        self.timer: threading.Timer | None = None

    def __enter__(self):
        self.t0 = time.perf_counter()
        wanted = os.environ.get("TCDSL_PROGRESS")
        if wanted == "1" or (wanted != "0" and sys.stderr.isatty()):
            self.timer = threading.Timer(PROGRESS_AFTER_S, self._show)
            self.timer.daemon = True
            self.timer.start()
        return self

    def _show(self) -> None:
        self.shown = True
        print(f"tcdsl: {self.what} ...", file=sys.stderr, flush=True)

    def __exit__(self, *exc) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer.join()
        if self.shown and exc[0] is None:
            print(f"tcdsl: {self.what}: done in {time.perf_counter() - self.t0:.1f} s", file=sys.stderr, flush=True)


def _load(path: str):
    from .source import Source

    return Source.read(path)


def _compile(args) -> int:
    from .options import parse as parse_options

    if args.emit == "grad":  # the adjoint as TC text (tcdsl.gradient)
        from .autodiff import gradient

        text = gradient(_load(args.file), args.entry)
    else:
        options = parse_options(_parse_options(args.options))
        sizes = _parse_sizes(args.sizes)
        with _Progress(f"compiling {args.file} for {args.target}"):
            text = _compiled_text(args, options, sizes)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def _compiled_text(args, options, sizes: dict[str, int]) -> str:
    from . import driver

    from .api import _kind

    fe = driver.frontend(_load(args.file), args.entry, options.frontend, _kind(args.target), fixed=sizes,
                         specialize=args.specialize)
    if args.emit in ("ast", "ranges"):
        return driver.STAGES[args.emit](_FrontendOnly(fe))
    from .dispatch import Kernel

    mode = args.specialize
    sizes = _with_derived(fe, sizes)
    if mode != "never" and set(sizes) != set(fe.checked.sizes):
        missing = sorted(set(fe.checked.sizes) - set(sizes))
        raise TcError(f"--specialize {mode} needs every size in --sizes; missing: {', '.join(missing)}")
    kernel = Kernel(fe, target=args.target, specialize=mode, sizes=sizes if mode == "never" else {},
                    options=options)
    return driver.emit(kernel, args.emit, sizes if mode != "never" else None)


class _FrontendOnly:
    def __init__(self, fe):
        self.frontend = fe


def _check(args) -> int:
    from . import driver
    from .sema.check import select_def
    from .syntax.parse import parse

    src = _load(args.file)
    program = parse(src)
    if not program.defs:
        select_def(program, None)  # the error compile gives: no def
    names = [d.name for d in program.defs]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        for name in names:
            driver.frontend(src, name, hoist=False)
    for w in caught:  # before the verdict, which counts them
        _show_warning(w.message, w.category, w.filename, w.lineno)
    sys.stderr.flush()
    note = f", {len(caught)} warning{'s' * (len(caught) != 1)}" if caught else ""
    print(f"{args.file}: ok ({', '.join(names)}){note}")
    return 0


def _with_derived(fe, sizes: dict[str, int]) -> dict[str, int]:
    """``sizes`` and the derived sizes they give (``G_x_G`` of ``G * G``), when they are all sizes of the def."""
    if any(s not in fe.checked.sizes for s in sizes):
        return sizes  # (the caller names the unknown one)
    from .codegen.signature import derived_sizes
    from .runtime.args import with_derived

    return with_derived(derived_sizes(fe.checked), sizes)


def _run(args) -> int:
    import numpy as np

    from . import driver
    from .options import parse as parse_options

    options = parse_options(_parse_options(args.options))
    sizes = _parse_sizes(args.sizes)
    fe = driver.frontend(_load(args.file), args.entry, options.frontend, fixed=sizes)
    sizes = _with_derived(fe, sizes)
    missing = [s for s in fe.checked.sizes if s not in sizes]
    if missing:
        raise TcError(f"--sizes is missing {', '.join(missing)}")
    unknown = [s for s in sizes if s not in fe.checked.sizes]
    if unknown:
        raise TcError(f"--sizes: {', '.join(unknown)} {'is not a size' if len(unknown) == 1 else 'are not sizes'} "
                      f"of '{fe.name}' (sizes: {', '.join(fe.checked.sizes)})")
    shapes = _check_run_memory(fe, sizes)
    rng = np.random.default_rng(args.seed)
    inputs = []
    for p, shape in zip(fe.checked.node.params, shapes):
        dtype = np.dtype(fe.checked.tensors[p.name].dtype)
        if dtype.kind in "iu":
            inputs.append(rng.integers(0, 4, shape, dtype=dtype))
        elif dtype.kind == "b":
            inputs.append(rng.integers(0, 2, shape, dtype=np.uint8).astype(bool))
        elif dtype in (np.float32, np.float64):
            inputs.append(rng.standard_normal(shape, dtype=dtype))
        else:  # float16: made in float32, the smallest type NumPy draws in
            inputs.append(rng.standard_normal(shape, dtype=np.float32).astype(dtype))
    from .dispatch import Kernel

    with _Progress(f"compiling {args.file}"):
        k = Kernel(fe, options=options)
    try:
        outs = k(*inputs, **{s: sizes[s] for s in fe.checked.free_sizes})  # no input carries them
    except MemoryError as e:
        raise TcError(f"--sizes {args.sizes}: not enough memory for the outputs ({e})") from None
    outs = outs if isinstance(outs, tuple) else (outs,)
    for name, o in zip(fe.checked.outputs, outs):
        print(f"{name}: shape {tuple(o.shape)} {o.dtype} sum {float(np.sum(o, dtype=np.float64)):.6g}")
    return 0


def _check_run_memory(fe, sizes: dict[str, int]) -> list[tuple[int, ...]]:
    """The input shapes for ``sizes``, after checking that every tensor fits
    int32 indexing (as a call checks) and that the random inputs and the
    outputs fit in RUN_MEMORY_SHARE of the machine's memory."""
    import numpy as np

    from .codegen.signature import check_index_range, evaluate, shape_function
    from .sema.check import dim_expr

    check_index_range(fe.ranges, sizes)
    params = fe.checked.node.params
    shapes = [tuple(evaluate(dim_expr(d), sizes) for d in fe.checked.tensors[p.name].dims) for p in params]
    if any(x < 0 for s in shapes for x in s):
        bad = next(p.name for p, s in zip(params, shapes) if any(x < 0 for x in s))
        raise TcError(f"--sizes give '{bad}' a negative size")
    outs = shape_function([fe.ranges.extent_exprs(t) for t in fe.checked.outputs])(sizes)
    total = sum(int(np.prod(s, dtype=np.int64)) * np.dtype(fe.checked.tensors[p.name].dtype).itemsize
                for p, s in zip(params, shapes))
    total += sum(int(np.prod(s, dtype=np.int64)) * np.dtype(fe.checked.tensors[t].dtype).itemsize
                 for t, s in zip(fe.checked.outputs, outs))
    limit = _memory_bytes() * RUN_MEMORY_SHARE
    if total > limit:
        raise TcError(f"--sizes {','.join(f'{k}={v}' for k, v in sizes.items())}: the random inputs and the outputs "
                      f"would take {total / 2**30:.1f} GiB; 'tcdsl run' uses at most {RUN_MEMORY_SHARE:.0%} of "
                      f"this machine's memory ({limit / 2**30:.1f} GiB)")
    return shapes


def _memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not POSIX: assume 8 GiB
        return 8 * 2**30


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


def _tune(args) -> int:
    from .tune import cli as tune_cli

    return tune_cli.run(args, _parse_sizes)


_COMMANDS = {"compile": _compile, "check": _check, "run": _run, "cache": _cache, "tune": _tune}

if __name__ == "__main__":
    sys.exit(main())
