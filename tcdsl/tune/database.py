"""The tuning database: every measurement the tuner makes, in one sqlite file.

A record is keyed by program (sha256 of the normalised ``def``), entry,
target, host CPU and sizes, and holds the options (the ``options=`` dict,
JSON), the median time in seconds (None when the candidate failed, with the
reason), where it ran (``local`` or the RPC key), the tuning run it belongs
to and when.  A *workload* record holds what a shape-generic run found: the
sizes and weights, the option sets kept and the dispatch rule between them.

Several tuners may write one file at once: the database runs in WAL mode,
each write is one short transaction, and a writer waits up to
``BUSY_TIMEOUT`` seconds for another's lock.  A reader never blocks a writer.

Location: ``database=`` (a path), else ``$TCDSL_TUNING_DB``, else
``tuning.sqlite`` in the disk cache's directory (``runtime/cache.py``).
"""
from __future__ import annotations

import json
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from ..errors import TcError

BUSY_TIMEOUT = 60.0
FILE_NAME = "tuning.sqlite"
# The device of the records the tuner makes last, calling the finalists in its own process (tune/confirm.py).
IN_PROCESS = "local, in-process"
# Options other than the defaults are kept only when their median beats the defaults' by this fraction.
MARGIN = 0.03

_SCHEMA = """
CREATE TABLE IF NOT EXISTS measurements (
    id INTEGER PRIMARY KEY,
    program TEXT NOT NULL,
    entry TEXT NOT NULL,
    target TEXT NOT NULL,
    cpu TEXT NOT NULL,
    sizes TEXT NOT NULL,
    options TEXT NOT NULL,
    seconds REAL,
    error TEXT,
    device TEXT NOT NULL,
    run TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS measurements_key ON measurements (program, entry, target, cpu);
CREATE TABLE IF NOT EXISTS decisions (
    id INTEGER PRIMARY KEY,
    program TEXT NOT NULL,
    entry TEXT NOT NULL,
    target TEXT NOT NULL,
    cpu TEXT NOT NULL,
    sizes TEXT NOT NULL,
    options TEXT NOT NULL,
    seconds REAL NOT NULL,
    run TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS workloads (
    id INTEGER PRIMARY KEY,
    program TEXT NOT NULL,
    entry TEXT NOT NULL,
    target TEXT NOT NULL,
    cpu TEXT NOT NULL,
    sizes TEXT NOT NULL,
    weights TEXT NOT NULL,
    option_sets TEXT NOT NULL,
    rule TEXT NOT NULL,
    run TEXT NOT NULL,
    created REAL NOT NULL
);
"""


def default_path() -> Path:
    env = os.environ.get("TCDSL_TUNING_DB")
    if env:
        return Path(env).expanduser()
    from ..runtime.cache import cache_dir

    return cache_dir() / FILE_NAME


def sizes_text(sizes: dict[str, int]) -> str:
    return json.dumps({k: int(v) for k, v in sorted(sizes.items())}, sort_keys=True)


def options_text(options: dict) -> str:
    return json.dumps(options, sort_keys=True)


def choose(medians: dict[str, float]) -> str:
    """The options (text) kept among measured ones: the fastest, unless the
    defaults (``"{}"``) were measured and it does not beat them by ``MARGIN``
    (a tuned kernel must never be slower than the default one)."""
    best = min(medians, key=medians.get)
    default = medians.get(options_text({}))
    if default is not None and best != options_text({}) and medians[best] > (1.0 - MARGIN) * default:
        return options_text({})
    return best


@dataclass(frozen=True)
class Key:
    """What a record is about: program hash, entry, target, host CPU."""

    program: str
    entry: str
    target: str
    cpu: str


@dataclass(frozen=True)
class Record:
    sizes: dict[str, int]
    options: dict
    seconds: float | None
    error: str | None
    device: str
    run: str
    created: float


@dataclass(frozen=True)
class Workload:
    sizes: list[dict[str, int]]
    weights: list[float]
    option_sets: list[dict]
    rule: dict
    run: str


class Database:
    """One tuning database file (created with its tables on first write)."""

    def __init__(self, path: str | os.PathLike | None = None):
        self.path = Path(path).expanduser() if path is not None else default_path()

    def exists(self) -> bool:
        return self.path.is_file()

    def _connect(self, create: bool) -> sqlite3.Connection:
        if create:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise TcError(f"tuning database {self.path}: cannot create its directory ({e.strerror})") from None
        try:
            uri = self.path.resolve().as_uri() + ("" if create else "?mode=ro")
            conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT, isolation_level=None)
            if create:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.executescript(_SCHEMA)
            return conn
        except sqlite3.DatabaseError as e:
            raise TcError(f"tuning database {self.path}: {e}") from None

    def _write(self, sql: str, rows: list[tuple]) -> None:
        conn = self._connect(create=True)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(sql, rows)
            conn.execute("COMMIT")
        except sqlite3.DatabaseError as e:
            raise TcError(f"tuning database {self.path}: {e}") from None
        finally:
            conn.close()

    def _read(self, sql: str, args: tuple) -> list[tuple]:
        if not self.exists():
            return []
        try:
            conn = self._connect(create=False)
        except TcError:
            return []
        try:
            return conn.execute(sql, args).fetchall()
        except sqlite3.OperationalError as e:
            if "no such table" in str(e):
                return []
            raise TcError(f"tuning database {self.path}: {e}") from None
        except sqlite3.DatabaseError as e:
            raise TcError(f"tuning database {self.path}: {e}") from None
        finally:
            conn.close()

    # ------------------------------------------------------------ writing
    def add(self, key: Key, records: list[Record]) -> None:
        """Append ``records`` (one transaction)."""
        if not records:
            return
        self._write(
            "INSERT INTO measurements (program, entry, target, cpu, sizes, options, seconds, error, device, run,"
            " created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(key.program, key.entry, key.target, key.cpu, sizes_text(r.sizes), options_text(r.options),
              r.seconds, r.error, r.device, r.run, r.created) for r in records])

    def add_decision(self, key: Key, sizes: dict[str, int], options: dict, seconds: float, run: str) -> None:
        """What tuning run ``run`` kept at ``sizes`` after its in-process confirmation (tune/confirm.py)."""
        self._write(
            "INSERT INTO decisions (program, entry, target, cpu, sizes, options, seconds, run, created)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(key.program, key.entry, key.target, key.cpu, sizes_text(sizes), options_text(options), seconds, run,
              time.time())])

    def add_workload(self, key: Key, w: Workload) -> None:
        self._write(
            "INSERT INTO workloads (program, entry, target, cpu, sizes, weights, option_sets, rule, run, created)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(key.program, key.entry, key.target, key.cpu, json.dumps(w.sizes), json.dumps(w.weights),
              json.dumps(w.option_sets, sort_keys=True), json.dumps(w.rule), w.run, time.time())])

    # ------------------------------------------------------------ reading
    def records(self, key: Key, *, ok_only: bool = False) -> list[Record]:
        rows = self._read(
            "SELECT sizes, options, seconds, error, device, run, created FROM measurements"
            " WHERE program = ? AND entry = ? AND target = ? AND cpu = ?"
            + (" AND seconds IS NOT NULL" if ok_only else "") + " ORDER BY id",
            (key.program, key.entry, key.target, key.cpu))
        return [Record(json.loads(s), json.loads(o), t, e, d, r, c) for s, o, t, e, d, r, c in rows]

    def best(self, key: Key) -> dict[str, tuple[dict, float]]:
        """For each tuned size tuple (its ``sizes_text``): the options kept and
        their time.  Only the most recent tuning run that measured a size
        counts (the machine, or the compiler, may have changed since an older
        one).  That run's decision where it made one (``add_decision``: the
        in-process confirmation's paired comparison), else :func:`choose` on
        the medians of its measurements -- of those made in process
        (``IN_PROCESS``) where there are some."""
        import statistics

        latest: dict[str, str] = {}
        confirmed: set[tuple[str, str]] = set()
        times: dict[tuple[str, str, bool], dict[str, list[float]]] = {}
        for r in self.records(key, ok_only=True):
            s = sizes_text(r.sizes)
            latest[s] = r.run
            here = r.device == IN_PROCESS
            if here:
                confirmed.add((s, r.run))
            times.setdefault((s, r.run, here), {}).setdefault(options_text(r.options), []).append(r.seconds)
        decided = {(s, run): (json.loads(o), t) for s, o, t, run in self._read(
            "SELECT sizes, options, seconds, run FROM decisions WHERE program = ? AND entry = ? AND target = ?"
            " AND cpu = ? ORDER BY id", (key.program, key.entry, key.target, key.cpu))}
        out: dict[str, tuple[dict, float]] = {}
        for s, run in latest.items():
            if (s, run) in decided:
                out[s] = decided[(s, run)]
                continue
            per = times.get((s, run, (s, run) in confirmed))
            if not per:
                continue
            medians = {o: statistics.median(ts) for o, ts in per.items()}
            o = choose(medians)
            out[s] = (json.loads(o), medians[o])
        return out

    def workload(self, key: Key) -> Workload | None:
        """The most recent shape-generic result for ``key``."""
        rows = self._read(
            "SELECT sizes, weights, option_sets, rule, run FROM workloads"
            " WHERE program = ? AND entry = ? AND target = ? AND cpu = ? ORDER BY id DESC LIMIT 1",
            (key.program, key.entry, key.target, key.cpu))
        if not rows:
            return None
        s, w, o, r, run = rows[0]
        return Workload(json.loads(s), json.loads(w), json.loads(o), json.loads(r), run)

    def count(self) -> int:
        rows = self._read("SELECT COUNT(*) FROM measurements", ())
        return rows[0][0] if rows else 0

    def __iter__(self) -> Iterator[dict[str, Any]]:
        cols = ("program", "entry", "target", "cpu", "sizes", "options", "seconds", "error", "device", "run",
                "created")
        for row in self._read(f"SELECT {', '.join(cols)} FROM measurements ORDER BY id", ()):
            d = dict(zip(cols, row))
            d["sizes"], d["options"] = json.loads(d["sizes"]), json.loads(d["options"])
            yield d

    def __repr__(self) -> str:
        return f"<tcdsl.tune.Database {self.path}>"
