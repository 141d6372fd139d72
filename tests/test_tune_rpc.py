"""Measuring on devices of a TVM RPC tracker: a tracker and two servers on 127.0.0.1."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

import tcdsl
from tcdsl.tune.database import Database
from helpers import ELMAN

SMALL = {"T": 3, "B": 2, "Ci": 4, "Co": 8}
KEY = "tcdsl-test"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def stop(p: subprocess.Popen) -> None:
    """The process and the session processes it forked."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait(timeout=30)


def listening(port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("the RPC tracker did not start")


def registered(port: int, n: int, timeout: float = 60.0) -> None:
    from tvm import rpc

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            info = rpc.connect_tracker("127.0.0.1", port).summary()
            if info.get("queue_info", {}).get(KEY, {}).get("free", 0) >= n:
                return
        except Exception:  # noqa: BLE001 -- not up yet
            pass
        time.sleep(0.5)
    raise RuntimeError("the RPC servers did not register")


@pytest.fixture
def tracker():
    """A tracker and two servers under KEY: (tracker port, [server processes])."""
    pytest.importorskip("tornado")
    port = free_port()
    procs = [start("tvm.exec.rpc_tracker", "--host", "127.0.0.1", "--port", str(port), "--port-end", str(port + 1))]
    try:
        listening(port)
        ports = [free_port() for _ in range(2)]
        servers = [start("tvm.exec.rpc_server", "--tracker", f"127.0.0.1:{port}", "--key", KEY,
                         "--host", "127.0.0.1", "--port", str(p), "--port-end", str(p + 1)) for p in ports]
        procs += servers
        registered(port, 2)
        yield port, servers
    finally:
        for p in procs:
            stop(p)


def test_an_unreachable_tracker_is_a_tc_error(tmp_path):
    port = free_port()  # nothing listens there
    started = time.monotonic()
    with pytest.raises(tcdsl.TcError, match=f"cannot reach the RPC tracker at 127.0.0.1:{port}"):
        tcdsl.autotune(ELMAN, sizes=SMALL, trials=2, database=tmp_path / "t.sqlite", progress=False,
                       rpc={"tracker": f"127.0.0.1:{port}", "key": KEY})
    assert time.monotonic() - started < 60


@pytest.mark.parametrize("rpc, message", [
    ({"tracker": "localhost"}, "expected"),
    ({"tracker": "nohost", "key": "k"}, "is not HOST:PORT"),
])
def test_bad_rpc_arguments(tmp_path, rpc, message):
    with pytest.raises(tcdsl.TcError, match=message):
        tcdsl.autotune(ELMAN, sizes=SMALL, trials=2, database=tmp_path / "t.sqlite", progress=False, rpc=rpc)


def test_a_lost_device_loses_only_its_candidate(monkeypatch):
    """A session that breaks is tried again on another one."""
    from tcdsl.tune import rpc
    from tcdsl.tune.measure import Built, Measured

    runner = rpc.RpcRunner.__new__(rpc.RpcRunner)
    runner.key, runner.device = KEY, f"rpc:{KEY}"
    runner.data = type("D", (), {"sizes": [SMALL]})()
    runner._tracker_lock = __import__("threading").Lock()
    sessions = []

    class Tracker:
        def request(self, key, priority, session_timeout):
            sessions.append(key)
            return len(sessions)

    runner.tracker = Tracker()

    def run(remote, built, best):
        if remote == 1:
            raise rpc._DeviceLost("connection reset")
        return Measured([1e-3], None, runner.device)

    monkeypatch.setattr(runner, "_run", run)
    m = runner._measure_one(Built("x.so", "f"), 10.0, [None])
    assert m.seconds == [1e-3] and len(sessions) == 2


@pytest.mark.slow
def test_tune_on_two_servers_survives_one_dying(tracker, tmp_path, monkeypatch):
    port, servers = tracker
    from tcdsl.tune import rpc

    real_run = rpc.RpcRunner._run
    calls = []

    def run_and_kill_a_server(self, remote, built, best):
        calls.append(built)
        if len(calls) == 3:  # mid-run: one server (and the session it may be serving) dies
            stop(servers[0])
        return real_run(self, remote, built, best)

    monkeypatch.setattr(rpc.RpcRunner, "_run", run_and_kill_a_server)
    path = tmp_path / "t.sqlite"
    result = tcdsl.autotune(ELMAN, sizes=SMALL, trials=6, database=path, progress=False,
                            rpc={"tracker": f"127.0.0.1:{port}", "key": KEY})
    assert len(result.trials) == 6
    assert all(t.ok for t in result.trials), [t.error for t in result.trials]
    rows = list(Database(path))
    assert rows and {r["device"] for r in rows} == {f"rpc:{KEY}"}


@pytest.mark.slow
def test_cli_tune_with_a_tracker(tracker, tmp_path, capsys):
    from tcdsl.cli import main

    port, _ = tracker
    path = tmp_path / "t.sqlite"
    rc = main(["tune", str(ELMAN), "--sizes", "T=3,B=2,Ci=4,Co=8", "--trials", "3", "--database", str(path),
               "--rpc-tracker", f"127.0.0.1:{port}", "--rpc-key", KEY, "--no-progress"])
    assert rc == 0 and "speed-up" in capsys.readouterr().out
    assert {r["device"] for r in Database(path)} == {f"rpc:{KEY}"}


def test_an_unknown_key_is_a_tc_error(tracker, tmp_path):
    port, _ = tracker
    with pytest.raises(tcdsl.TcError, match="no device is registered under the key 'other'"):
        tcdsl.autotune(ELMAN, sizes=SMALL, trials=2, database=tmp_path / "t.sqlite", progress=False,
                       rpc={"tracker": f"127.0.0.1:{port}", "key": "other"})
