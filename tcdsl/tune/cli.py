"""``tcdsl tune``: tune a program from the command line.

    tcdsl tune FILE.tc [--entry NAME] --sizes T=64,B=32 [--sizes ...] [--weights 3,1]
               [--trials N] [--database PATH] [--rpc-tracker HOST:PORT --rpc-key NAME]

A progress bar on stderr (trials done, best so far, time left), then on
stdout a table of the best options and the speed-up per size tuple.  Ctrl-C
stops the search; what was measured is in the database and in the table
(exit status 130).
"""
from __future__ import annotations

import argparse


def add_parser(sub) -> None:
    """The ``tune`` subcommand of ``tcdsl`` (tcdsl/cli.py)."""
    t = sub.add_parser("tune", help="search mapping options for the given sizes and record them",
                       description="Search mapping options and schedule choices for FILE at the given sizes, "
                                   "record every measurement in the tuning database, and print the best "
                                   "options per size. tcdsl.compile then uses them (see docs/tuning.md).")
    t.add_argument("file", help="the .tc file")
    t.add_argument("--entry", help="the def to tune (when the file has several)")
    t.add_argument("--sizes", action="append", required=True, metavar="T=64,B=32,...",
                   help="every size of the def; give --sizes several times for a workload")
    t.add_argument("--weights", metavar="W1,W2,...", help="how often each --sizes occurs (default: equally)")
    t.add_argument("--trials", type=int, default=64, help="candidates to measure (default 64)")
    t.add_argument("--database", metavar="PATH", help="the tuning database (default: $TCDSL_TUNING_DB, "
                                                       "else tuning.sqlite beside the kernel cache)")
    t.add_argument("--target", default="llvm", choices=("llvm", "cuda"), help="what to tune for (default llvm)")
    t.add_argument("--rpc-tracker", metavar="HOST:PORT", help="measure on the devices of this TVM RPC tracker")
    t.add_argument("--rpc-key", metavar="NAME", help="the device key of --rpc-tracker")
    t.add_argument("--seed", type=int, default=0, help="seed of the search and of the random inputs")
    t.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args: argparse.Namespace, parse_sizes) -> int:
    """``parse_sizes``: ``--sizes`` text to a dict (tcdsl/cli.py's, shared with ``run``)."""
    import sys

    from ..errors import TcError
    from .tuner import autotune

    sizes = [parse_sizes(s) for s in args.sizes]
    weights = None
    if args.weights:
        try:
            weights = [float(w) for w in args.weights.split(",")]
        except ValueError:
            raise TcError(f"--weights: expected numbers separated by commas, got '{args.weights}'") from None
    rpc = None
    if args.rpc_tracker or args.rpc_key:
        if not (args.rpc_tracker and args.rpc_key):
            raise TcError("--rpc-tracker and --rpc-key go together")
        rpc = {"tracker": args.rpc_tracker, "key": args.rpc_key}
    result = autotune(args.file, args.entry, sizes=sizes, weights=weights, trials=args.trials,
                      database=args.database, target=args.target, rpc=rpc, progress=not args.no_progress,
                      seed=args.seed)
    print(result.table())
    failed = sum(1 for t in result.trials if not t.ok)
    print(f"{len(result.trials)} trials ({failed} failed) in {result.seconds:.1f} s; "
          f"recorded in {result.database}")
    if result.option_sets:
        print(f"workload: {len(result.option_sets)} option set(s) kept, with a dispatch rule over the sizes")
    if result.interrupted:
        print("interrupted: the measurements so far are kept", file=sys.stderr)
        return 130
    return 0
