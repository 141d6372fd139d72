"""Shared pytest setup: golden files and the ``cuda`` marker.

``golden(stage, name, text)`` compares ``text`` with
``tests/golden/<stage>/<name>.txt``; ``pytest --update-goldens`` writes the
files instead (TC ``test_lang.cc --accept``).  Tests marked
``@pytest.mark.cuda`` are skipped unless TVM sees a CUDA device.
"""
from __future__ import annotations

import atexit
import difflib
import os
import shutil
import tempfile
from pathlib import Path

import pytest

# Every test session gets an empty on-disk kernel cache of its own, so tests
# neither read nor fill the user's cache (tests/test_cache.py makes its own).
# (removed when the process ends: a run leaves nothing in the temp directory)
os.environ["TCDSL_CACHE_DIR"] = tempfile.mkdtemp(prefix="tcdsl-test-cache-")
atexit.register(shutil.rmtree, os.environ["TCDSL_CACHE_DIR"], ignore_errors=True)
# ... and the tuning database beside it (tests that tune name their own)
os.environ.pop("TCDSL_TUNING_DB", None)

GOLDEN_DIR = Path(__file__).parent / "golden"


def pytest_addoption(parser):
    parser.addoption("--update-goldens", action="store_true", default=False,
                     help="rewrite tests/golden/** with the current output instead of comparing")


@pytest.fixture
def avx512_tiles(monkeypatch):
    """The default register tiles and vector width of a host with AVX-512
    (``tcdsl.options.host_defaults``: 16-lane vectors, 4 x 64 tiles, 8 x 48
    inside a sequential loop), whatever this machine has: for tests that
    read those shapes in the generated TIR.  On a machine without AVX-512
    LLVM splits each 16-lane vector in two, so the results are checked all
    the same."""
    from tcdsl import host

    monkeypatch.setattr(host, "avx512", lambda: True)


@pytest.fixture
def golden(request):
    update = request.config.getoption("--update-goldens")

    def check(stage: str, name: str, text: str) -> None:
        path = GOLDEN_DIR / stage / f"{name}.txt"
        if not text.endswith("\n"):
            text += "\n"
        if update:
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                path.write_text(text, encoding="utf-8")
            return
        if not path.exists():
            pytest.fail(f"no golden file {path.relative_to(GOLDEN_DIR.parent.parent)}; "
                        f"run pytest with --update-goldens to create it", pytrace=False)
        expected = path.read_text(encoding="utf-8")
        if expected != text:
            diff = "".join(difflib.unified_diff(expected.splitlines(keepends=True), text.splitlines(keepends=True),
                                                f"{path.name} (golden)", f"{path.name} (actual)"))
            pytest.fail(f"output differs from {path}; review and run with --update-goldens if intended:\n{diff}",
                        pytrace=False)

    return check


def _cuda_present() -> bool:
    try:
        import tvm

        return bool(tvm.cuda(0).exist)
    except Exception:  # no TVM CUDA runtime: treat as no device
        return False


# The specializations a test may be parametrized over.  Such a test runs
# symbolic ("never") in the default run and specialized under ``-m slow``
# (or, with no symbolic case, its first mode only); tests/test_corpus.py and
# tests/test_specialize.py run their specializations in the default run.
_SPECIALIZED = ("after-scheduling", "before-scheduling")
_SPECIALIZING_FILES = ("test_corpus.py", "test_specialize.py")


def _mode(item):
    callspec = getattr(item, "callspec", None)
    if callspec is None or item.path.name in _SPECIALIZING_FILES:
        return None
    return next((v for v in callspec.params.values() if isinstance(v, str)
                 and v in ("never",) + _SPECIALIZED), None)


def _specialized_in_slow_run(items) -> None:
    by_function: dict = {}
    for item in items:
        if _mode(item) is not None:
            by_function.setdefault((item.path, item.originalname), []).append(item)
    for group in by_function.values():
        modes = [_mode(item) for item in group]
        kept = "never" if "never" in modes else modes[0]
        for item, mode in zip(group, modes):
            if mode != kept:
                item.add_marker(pytest.mark.slow)


# Test cases that took 8 s or more each in a default run on a 2-core machine
# (`--durations=0`), one node id per line: they run under ``-m slow``, so that
# the default run stays near 15 minutes.  The corpus, the docs' examples and
# the benchmarks' smoke test choose their default cases themselves.
SLOW_CASES = Path(__file__).parent / "slow_cases.txt"


def _listed_slow_cases() -> set[str]:
    lines = SLOW_CASES.read_text(encoding="utf-8").splitlines()
    return {line.strip() for line in lines if line.strip() and not line.startswith("#")}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    _specialized_in_slow_run(items)
    slow_cases = _listed_slow_cases()
    for item in items:
        if item.nodeid in slow_cases:
            item.add_marker(pytest.mark.slow)
    cuda_items = [item for item in items if item.get_closest_marker("cuda")]
    if not cuda_items or _cuda_present():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (tvm.cuda(0).exist is false)")
    for item in cuda_items:
        item.add_marker(skip)
