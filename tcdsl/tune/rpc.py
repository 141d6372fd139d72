"""The RPC runner: candidates measured on the devices of a TVM RPC tracker.

Devices register with a tracker under a key::

    python -m tvm.exec.rpc_tracker --host 0.0.0.0 --port 9190
    python -m tvm.exec.rpc_server --tracker HOST:9190 --key NAME

(TVM's RPC needs tornado, cloudpickle and psutil: ``pip install tcdsl[rpc]``.)
The runner asks the tracker for as many sessions at once as it has devices
free under the key; each session uploads a candidate's library, the inputs,
runs the checking call and TVM's ``time_evaluator`` on the device, exactly
as the local runner does (``measure.measure_module``).  A session that
fails for a reason of the device's (the server died, the connection broke)
loses only its candidate, which is tried again on another session, up to
``RETRIES`` times; a run past its time limit is given up (the server's
session timeout ends it there).  Each measurement records ``rpc:NAME`` as
its device.
"""
from __future__ import annotations

import concurrent.futures as cf
import os
import threading

from ..errors import TcError
from .measure import Built, Measured, TaskData, measure_module, _reason

RETRIES = 2
# seconds to wait for a session when every device is busy
_REQUEST_TIMEOUT = 60.0


def _parse(rpc) -> tuple[str, int, str]:
    if not isinstance(rpc, dict) or not isinstance(rpc.get("tracker"), str) or not isinstance(rpc.get("key"), str):
        raise TcError('rpc: expected {"tracker": "HOST:PORT", "key": NAME}')
    host, sep, port = rpc["tracker"].rpartition(":")
    if not sep or not host or not port.isdigit():
        raise TcError(f"rpc: tracker '{rpc['tracker']}' is not HOST:PORT")
    if not rpc["key"]:
        raise TcError("rpc: the key is empty")
    return host, int(port), rpc["key"]


def connect(rpc):
    """The tracker session, checked: reachable, and devices registered under the key."""
    host, port, key = _parse(rpc)
    import socket

    try:  # TVM's client retries an unreachable tracker for minutes: fail at once instead
        socket.create_connection((host, port), timeout=10).close()
    except OSError as e:
        raise TcError(f"rpc: cannot reach the RPC tracker at {host}:{port} ({e.strerror or e})") from None
    try:
        from tvm import rpc as tvm_rpc

        tracker = tvm_rpc.connect_tracker(host, port)
        summary = tracker.summary()
    except ImportError as e:
        raise TcError(f"rpc: TVM's RPC client cannot be imported ({e}); install tcdsl[rpc]") from None
    except Exception as e:  # noqa: BLE001 -- a refused connection, a timeout, a non-tracker peer
        raise TcError(f"rpc: cannot reach the RPC tracker at {host}:{port} ({_reason(e)})") from None
    queue = summary.get("queue_info", {}).get(key)
    if not queue or queue.get("free", 0) + queue.get("pending", 0) < 1 and not _servers(summary, key):
        known = ", ".join(sorted(summary.get("queue_info", {}))) or "none"
        raise TcError(f"rpc: no device is registered under the key '{key}' with the tracker at {host}:{port} "
                      f"(keys: {known})")
    return tracker, key


def _servers(summary: dict, key: str) -> int:
    return sum(1 for s in summary.get("server_info", []) if s.get("key", "").split(":")[-1] == key)


class RpcRunner:
    """Measures on the devices registered under ``rpc["key"]``."""

    def __init__(self, rpc, data: TaskData, repeat: int, min_repeat_ms: float, target_kind: str = "llvm"):
        self.tracker, self.key = connect(rpc)
        self.data, self.repeat, self.min_repeat_ms, self.kind = data, repeat, min_repeat_ms, target_kind
        self.device = f"rpc:{self.key}"
        self._lock = threading.Lock()
        self._tracker_lock = threading.Lock()  # one tracker connection: one request on it at a time

    def _devices(self) -> int:
        try:
            return max(1, _servers(self.tracker.summary(), self.key))
        except Exception:  # noqa: BLE001 -- the count is only how many sessions to open at once
            return 1

    def measure(self, items: list[tuple[Built, float]], best: list[float | None]) -> list[Measured]:
        """Measure each ``(built, time limit)`` on the devices, several at once."""
        out: list[Measured | None] = [None] * len(items)
        pool = cf.ThreadPoolExecutor(max_workers=self._devices())
        try:
            futures = {pool.submit(self._measure_one, b, limit, list(best)): i for i, (b, limit) in enumerate(items)}
            for f, i in futures.items():
                limit = items[i][1]
                try:
                    out[i] = f.result(timeout=(limit + _REQUEST_TIMEOUT) * (RETRIES + 1))
                except cf.TimeoutError:
                    out[i] = Measured([None] * len(self.data.sizes), f"killed: ran for more than {limit:.1f} s",
                                      self.device)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
        return out

    def _measure_one(self, built: Built, limit: float, best: list[float | None]) -> Measured:
        n = len(self.data.sizes)
        if built.path is None:
            return Measured([None] * n, built.error, self.device)
        error = None
        for _ in range(RETRIES + 1):
            try:
                with self._tracker_lock:
                    remote = self.tracker.request(self.key, priority=1, session_timeout=int(limit) + 1)
            except Exception as e:  # noqa: BLE001
                error = f"no RPC session ({_reason(e)})"
                continue
            try:
                return self._run(remote, built, best)
            except _DeviceLost as e:
                error = f"device lost ({e})"  # tried again on another session
        return Measured([None] * n, error, self.device)

    def _run(self, remote, built: Built, best: list[float | None]) -> Measured:
        name = os.path.basename(built.path)
        try:
            remote.upload(built.path)
            module = remote.load_module(name)
            dev = remote.cuda(0) if self.kind == "cuda" else remote.cpu(0)
        except Exception as e:  # noqa: BLE001
            raise _DeviceLost(_reason(e)) from None
        seconds: list[float | None] = []
        error = None
        for i in range(len(self.data.sizes)):
            try:
                with self._lock:  # the .npy files are read once, by one thread
                    data = self.data.load(i)
                seconds.append(measure_module(module, dev, built, self.data, i, repeat=self.repeat,
                                              min_repeat_ms=self.min_repeat_ms, best=best[i], inputs=data))
            except ValueError as e:  # a wrong result: the candidate's fault, not the device's
                seconds.append(None)
                error = error or str(e)
            except Exception as e:  # noqa: BLE001
                raise _DeviceLost(_reason(e)) from None
        try:
            remote.remove(name)
        except Exception:  # noqa: BLE001 -- the server cleans its directory at exit anyway
            pass
        return Measured(seconds, error, self.device)

    def close(self) -> None:
        pass


class _DeviceLost(Exception):
    pass
