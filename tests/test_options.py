"""``options=`` parsed once into per-stage records (tcdsl/options.py), and the
disk cache key that the options and the host decide (thread count, CPU)."""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tcdsl
from tcdsl import options as opts
from helpers import ELMAN, ROOT, elman_inputs, reference

MATMUL = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }"


@pytest.mark.parametrize("key, nearest", [("tile_rowz", "tile_rows"), ("tilerows", "tile_rows"),
                                          ("hoisting", "hoist"), ("disk_cahce", "disk_cache"),
                                          ("thread", "threads"), ("cpu_thread", "cpu_threads")])
def test_a_misspelt_key_names_the_nearest_one(key, nearest):
    with pytest.raises(tcdsl.TcError, match=rf"unknown option '{key}'; did you mean '{nearest}'\?"):
        tcdsl.compile(MATMUL, options={key: 4})


def test_an_unknown_key_lists_the_options():
    with pytest.raises(tcdsl.TcError) as e:
        opts.parse({"xyzzy": 1})
    assert "unknown option 'xyzzy'; the options are " in str(e.value) and "tile_rows" in str(e.value)


def test_each_stage_gets_its_record():
    o = opts.parse({"hoist": False, "fold": False, "tile_rows": 2, "threads": 64, "auto_threshold": 5,
                    "reuse_outputs": False, "strict_bounds": True})
    assert o.frontend == opts.FrontendOptions(strict_bounds=True, hoist=False)
    assert o.lowering == opts.LoweringOptions(fold=False)
    assert o.cpu == opts.CpuMapping(tile_rows=2)
    assert o.cuda == opts.CudaMapping(threads=64)
    assert o.dispatch == opts.DispatchOptions(auto_threshold=5)
    assert o.runtime == opts.RuntimeOptions(reuse_outputs=False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.cpu.tile_rows = 4  # type: ignore[misc]
    assert opts.parse(o) is o and o["tile_rows"] == 2 and {**o, "hoist": True}["hoist"] is True
    # a MappingOptions is the same as its dict
    assert opts.parse(tcdsl.MappingOptions(tile_rows=2, hoist=False)) == opts.parse({"hoist": False, "tile_rows": 2})


def test_checked_mode_makes_the_cpu_mapping_serial():
    assert opts.parse({"checked": True}).cpu.parallel is False
    assert opts.parse({}).cpu.parallel is True


@pytest.mark.parametrize("bad, message", [
    ({"auto_threshold": "3"}, "'auto_threshold' must be a positive integer"),
    ({"auto_threshold": 0}, "'auto_threshold' must be a positive integer"),
    ({"disk_cache": 0}, "'disk_cache' must be True or False"),
    ({"strict_bounds": "yes"}, "'strict_bounds' must be True or False"),
    ({"flatten": 0}, "'flatten' must be a positive integer"),
])
def test_bad_values(bad, message):
    with pytest.raises(tcdsl.TcError, match=message):
        tcdsl.compile(MATMUL, options=bad)


def test_the_kernel_keeps_the_parsed_options():
    k = tcdsl.compile(MATMUL, options={"tile_rows": 2})
    assert isinstance(k.options, opts.Options) and k.options.cpu.tile_rows == 2
    assert k.options.to_dict() == {"tile_rows": 2}


# ------------------------------------------------------------ the cache key
def test_cache_fields_are_the_meaning_not_the_spelling(monkeypatch):
    monkeypatch.setenv("TVM_NUM_THREADS", "2")
    same = opts.parse({}).cache_fields("llvm")
    assert opts.parse({"tile_rows": 0, "auto_threshold": 9, "disk_cache": True}).cache_fields("llvm") == same
    assert opts.parse({"tile_rows": 2}).cache_fields("llvm") != same
    # the threads the chunks are cut for: from the environment, or cpu_threads
    monkeypatch.setenv("TVM_NUM_THREADS", "3")
    assert opts.parse({}).cache_fields("llvm") != same
    assert opts.parse({"cpu_threads": 2}).cache_fields("llvm")["cpu"]["threads"] == 2
    fields = opts.parse({}).cache_fields("llvm")
    assert fields["cpu"]["threads"] == 3 and fields["host"]["cpu"] and isinstance(fields["host"]["avx512"], bool)
    assert fields["cpu"]["vector_width"] in (8, 16)  # resolved: the host's defaults are in the key
    assert "host" not in opts.parse({}).cache_fields("cuda")  # CUDA code does not depend on the CPU's threads


CHILD = textwrap.dedent("""
    import json, sys
    import tcdsl
    k = tcdsl.compile(sys.argv[1])
    print(json.dumps({"info": k.cache_info(), "script": k.script}))
""")


def _compile_in_a_process(cache_dir, threads: str) -> dict:
    env = {**os.environ, "TCDSL_CACHE_DIR": str(cache_dir), "TCDSL_DISK_CACHE": "1", "TVM_NUM_THREADS": threads}
    r = subprocess.run([sys.executable, "-c", CHILD, str(ELMAN)], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.splitlines()[-1])


def _threads_of(script: str) -> int:
    """The thread count in the Elman RNN's chunk formula (codegen/cpu.py):
    ``((B + tile - 1) // tile + threads - 1) // threads`` row tiles per thread."""
    import re

    return int(re.search(r"\(T\.max\(B, 0\) \+ \d+ - 1\) // \d+ \+ (\d+) - 1", script).group(1))


def test_a_binary_cut_for_one_thread_count_is_not_loaded_under_another(tmp_path):
    """TVM_NUM_THREADS decides how the rows are cut into chunks (codegen/cpu.py):
    a process with another thread count compiles anew instead of loading a
    binary that would run its chunks on too few threads."""
    one = _compile_in_a_process(tmp_path, "1")
    assert one["info"]["compiles"] == 1 and one["info"]["disk_hits"] == 0
    four = _compile_in_a_process(tmp_path, "4")
    assert four["info"]["compiles"] == 1 and four["info"]["disk_hits"] == 0
    assert _threads_of(one["script"]) == 1 and _threads_of(four["script"]) == 4
    again = _compile_in_a_process(tmp_path, "4")  # the same thread count: the entry is used
    assert again["info"]["compiles"] == 0 and again["info"]["disk_hits"] == 1
    inputs = elman_inputs(np.random.default_rng(0), 3, 2, 4, 6)
    np.testing.assert_allclose(tcdsl.compile(ELMAN, options={"disk_cache": False})(*inputs),
                               reference.elman_rnn(*inputs), rtol=1e-5, atol=1e-5)
