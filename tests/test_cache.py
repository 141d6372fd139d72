"""The on-disk cache of compiled kernels (issue 4): hits across kernels and
processes, corrupt entries rebuilt, two processes racing on an empty cache,
``tcdsl cache info/clear``.

Each test here gets an empty cache directory of its own, with the disk cache
switched on (``disk`` fixture); tests/conftest.py gives the rest of the
session a throw-away one.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

import tcdsl
from tcdsl.cli import main
from tcdsl.runtime import cache
from helpers import ELMAN, ROOT, elman_inputs, reference

ELMAN_TEXT = ELMAN.read_text(encoding="utf-8")
# The same program, other whitespace and comments: the same cache entry.
ELMAN_REFORMATTED = "# reformatted\n" + ELMAN_TEXT.replace("  ", "    ").replace(") {", ")\n{ # open")


@pytest.fixture
def disk(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("TCDSL_CACHE_DIR", str(d))
    monkeypatch.setenv("TCDSL_DISK_CACHE", "1")
    return d


def check(k, T=3, B=2, Ci=4, Co=6, seed=0):
    inputs = elman_inputs(np.random.default_rng(seed), T, B, Ci, Co)
    np.testing.assert_allclose(k(*inputs), reference.elman_rnn(*inputs), rtol=1e-5, atol=1e-5)


def libraries(d: Path) -> list[Path]:
    return sorted(d.glob("*.so"))


def counts(k) -> tuple[int, int]:
    info = k.cache_info()
    return info["compiles"], info["disk_hits"]


# ------------------------------------------------------------- one process
def test_a_build_stored_on_disk_is_called_from_its_library_not_compiled_again(disk, monkeypatch):
    """Writing the library generates the machine code; the kernel then calls
    that library rather than having LLVM's JIT generate the code a second
    time (about a quarter of the time LLVM spent on a compile)."""
    import tvm

    jitted = []
    getitem = tvm.runtime.Executable.__getitem__
    monkeypatch.setattr(tvm.runtime.Executable, "__getitem__",
                        lambda self, name: jitted.append(name) or getitem(self, name))
    k = tcdsl.compile(ELMAN)
    check(k)
    assert jitted == [] and len(libraries(disk)) == 1
    monkeypatch.setenv("TCDSL_DISK_CACHE", "0")  # no library: the in-memory build serves
    check(tcdsl.compile(ELMAN_REFORMATTED))
    assert jitted


def test_a_second_kernel_of_the_same_program_is_a_disk_hit(disk):
    k1 = tcdsl.compile(ELMAN)
    assert counts(k1) == (1, 0)
    assert cache.info()["entries"] == 1 and len(libraries(disk)) == 1
    k2 = tcdsl.compile(ELMAN_REFORMATTED)  # normalised program: whitespace and comments do not matter
    assert counts(k2) == (0, 1)
    check(k2)
    check(k2, T=7, B=3, Ci=5, Co=2)
    # The backend (schedule, TIR) of a loaded binary is made only when asked for.
    assert k2._binaries[None]._backend is None
    assert "T.int32" in k2.script and k2.schedule == k1.schedule
    meta = json.loads(next(disk.glob("*.json")).read_text())
    assert meta["function"] == "elman_rnn" and meta["size_params"] == ["T", "B", "Ci", "Co"]
    assert set(meta["fields"]) >= {"program", "entry", "pipeline", "fixed", "sizes", "options", "target", "tcdsl",
                                   "tvm", "compiler"}


@pytest.mark.slow
def test_per_size_binaries_are_shared_through_the_disk(disk):
    k1 = tcdsl.compile(ELMAN, specialize="after-scheduling")
    check(k1, T=3)
    check(k1, T=5)
    assert counts(k1) == (3, 0)  # and the symbolic binary they are measured against (dispatch.py)
    k2 = tcdsl.compile(ELMAN, specialize="after-scheduling")
    check(k2, T=5)
    check(k2, T=4)
    assert counts(k2) == (1, 2)
    # auto makes the binaries never and after-scheduling make: a size met before is served specialised at once.
    k3 = tcdsl.compile(ELMAN, specialize="auto", options={"auto_threshold": 100})
    check(k3, T=4)
    assert counts(k3) == (0, 2) and (4, 2, 4, 6) in k3._binaries  # both from the disk
    assert (4, 2, 4, 6) in k3.measured  # and measured against the symbolic binary before it serves


def test_what_changes_the_code_changes_the_key(disk):
    import tvm

    tcdsl.compile(ELMAN)
    assert counts(tcdsl.compile(ELMAN, sizes={"Co": 6})) == (1, 0)
    assert counts(tcdsl.compile(ELMAN, target=tvm.target.Target("llvm"))) == (1, 0)  # no -mcpu
    assert counts(tcdsl.compile(ELMAN_TEXT.replace("tanh", "sigmoid"))) == (1, 0)
    assert counts(tcdsl.compile(ELMAN, options={"auto_threshold": 7})) == (0, 1)  # a runtime-only option
    assert cache.info()["entries"] == 4


@pytest.mark.slow
def test_the_disk_cache_can_be_switched_off(disk, monkeypatch):
    assert counts(tcdsl.compile(ELMAN, options={"disk_cache": False})) == (1, 0)
    assert not disk.exists()
    monkeypatch.setenv("TCDSL_DISK_CACHE", "0")
    assert counts(tcdsl.compile(ELMAN)) == (1, 0)
    assert not disk.exists()


def corrupt_truncate(lib: Path, meta: Path):
    data = lib.read_bytes()
    lib.unlink()  # a new file: never rewrite a library some process may have mapped
    lib.write_bytes(data[: len(data) // 3])


def corrupt_garble(lib: Path, meta: Path):
    data = bytearray(lib.read_bytes())
    data[len(data) // 2: len(data) // 2 + 64] = os.urandom(64)
    lib.unlink()
    lib.write_bytes(bytes(data))


def corrupt_not_a_library(lib: Path, meta: Path):
    """A checksum that matches a file that is not a shared library: caught when it is loaded."""
    lib.unlink()
    lib.write_bytes(b"not an ELF file")
    m = json.loads(meta.read_text())
    import hashlib

    m["bytes"], m["sha256"] = 15, hashlib.sha256(b"not an ELF file").hexdigest()
    meta.write_text(json.dumps(m))


def corrupt_json(lib: Path, meta: Path):
    meta.write_text(meta.read_text()[:40])


def corrupt_missing_library(lib: Path, meta: Path):
    lib.unlink()


@pytest.fixture(scope="module")
def elman_entry(tmp_path_factory):
    """A cache directory with the one entry ``tcdsl.compile(ELMAN)`` writes,
    built once for the corruption tests (each corrupts a copy)."""
    d = tmp_path_factory.mktemp("elman-entry") / "cache"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TCDSL_CACHE_DIR", str(d))
        mp.setenv("TCDSL_DISK_CACHE", "1")
        assert counts(tcdsl.compile(ELMAN)) == (1, 0)
    assert len(libraries(d)) == 1 and len(list(d.glob("*.json"))) == 1
    return d


@pytest.mark.parametrize("corrupt", [corrupt_truncate, corrupt_garble, corrupt_not_a_library, corrupt_json,
                                     corrupt_missing_library], ids=lambda f: f.__name__[8:])
def test_a_corrupt_entry_is_deleted_and_rebuilt(disk, corrupt, elman_entry):
    shutil.copytree(elman_entry, disk)  # the entry tcdsl.compile(ELMAN) writes
    (lib,), meta = libraries(disk), next(disk.glob("*.json"))
    corrupt(lib, meta)
    with pytest.warns(cache.TcCacheWarning, match="unusable"):
        k = tcdsl.compile(ELMAN)
    assert counts(k) == (1, 0)
    check(k)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        k = tcdsl.compile(ELMAN)  # the rebuilt entry is whole again
    assert counts(k) == (0, 1)
    check(k)


def test_an_unwritable_cache_warns_and_the_kernel_still_works(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("TCDSL_CACHE_DIR", str(blocker / "cache"))  # under a regular file
    monkeypatch.setenv("TCDSL_DISK_CACHE", "1")
    with pytest.warns(cache.TcCacheWarning, match="cannot write"):
        k = tcdsl.compile(ELMAN)
    check(k)


# ------------------------------------------------------- several processes
CHILD = textwrap.dedent("""
    import json, os, sys, time
    from pathlib import Path
    sys.path.insert(0, {tests!r})
    import numpy as np
    import tcdsl
    from helpers import ELMAN, elman_inputs, reference
    go = os.environ.get("GO_FILE")
    if go:  # imports done: say so, then wait for the other process
        Path(os.environ["READY_FILE"]).write_text("")
        while not os.path.exists(go):
            time.sleep(0.005)
    k = tcdsl.compile(ELMAN, specialize=sys.argv[1])
    inputs = elman_inputs(np.random.default_rng(1), 5, 3, 4, 6)
    ok = bool(np.allclose(k(*inputs), reference.elman_rnn(*inputs), rtol=1e-5, atol=1e-5))
    print(json.dumps({{**k.cache_info(), "ok": ok}}))
""").format(tests=str(ROOT / "tests"))


def spawn(disk: Path, mode: str = "never", **env) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CHILD, mode], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "TCDSL_CACHE_DIR": str(disk), "TCDSL_DISK_CACHE": "1", **env})


def result(p: subprocess.Popen) -> dict:
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    assert "Traceback" not in err and "TcCacheWarning" not in err, err
    return json.loads(out.strip().splitlines()[-1])


def test_two_processes_racing_on_an_empty_cache_both_succeed_and_a_third_loads_from_disk(disk, tmp_path):
    go = tmp_path / "go"
    procs = [spawn(disk, GO_FILE=str(go), READY_FILE=str(tmp_path / f"ready{i}")) for i in range(2)]
    deadline = time.time() + 240
    while not all((tmp_path / f"ready{i}").exists() for i in range(2)):
        assert time.time() < deadline and all(p.poll() is None for p in procs), [p.communicate() for p in procs]
        time.sleep(0.01)
    go.write_text("")  # both start compiling now
    results = [result(p) for p in procs]
    assert all(r["ok"] for r in results)
    assert sum(r["compiles"] for r in results) >= 1 and sum(r["compiles"] + r["disk_hits"] for r in results) == 2
    assert cache.info()["entries"] == 1
    assert not list(disk.glob(".tmp-*"))  # no temporaries left behind
    third = result(spawn(disk))
    assert third["ok"] and (third["compiles"], third["disk_hits"]) == (0, 1)


# ---------------------------------------------------------------------- CLI
def test_cache_info_and_clear_on_the_command_line(disk, capsys):
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert f"directory: {disk}" in out and "entries:   0" in out
    tcdsl.compile(ELMAN)
    tcdsl.compile(ELMAN, sizes={"B": 2})
    (disk / "unrelated.txt").write_text("not ours")
    assert main(["cache", "info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    size = sum(p.stat().st_size for p in disk.iterdir() if p.name != "unrelated.txt")
    assert info == {"directory": str(disk), "entries": 2, "bytes": size, "enabled": True}
    assert main(["cache", "clear"]) == 0
    assert capsys.readouterr().out.strip() == f"removed 2 entries from {disk}"
    assert [p.name for p in disk.iterdir()] == ["unrelated.txt"]  # only tcdsl's files are removed
    assert counts(tcdsl.compile(ELMAN)) == (1, 0)
