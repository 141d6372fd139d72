"""The CUDA backend (docs/cuda.md).

Without a GPU (the default here): the corpus compiles for CUDA (TVM's
CUDA codegen, after tcdsl's VerifyMemory check; a representative subset by
default, all of it under ``-m slow``), kernels are bound to
blockIdx/threadIdx with guards, the program's sequential loops are host
loops launching the kernels, nvcc compiles a subset (all of the corpus under
``-m slow``), and the Elman and QRNN kernels match golden files
(``TCDSL_UPDATE_GOLDENS=1`` rewrites them).  The mapped programs also run on
the CPU with the thread loops made serial (``options={"emulate": True}``)
against NumPy: a subset by default, the corpus under ``-m slow``.  Tests
marked ``cuda`` compare with NumPy on a GPU and are skipped without one.
"""
from __future__ import annotations

import os
import pathlib
import re
import shutil
import sys

import numpy as np
import pytest

import tcdsl
from tcdsl.codegen import targets
from tcdsl.errors import InternalError
from tcdsl.runtime.signature import compile_shapes

ROOT = pathlib.Path(__file__).resolve().parents[1]
PROGRAMS = ROOT / "tests" / "programs"
EXAMPLES = ROOT / "examples" / "rnn"
GOLDEN = ROOT / "tests" / "golden" / "cuda"
sys.path.insert(0, str(PROGRAMS))
import cases  # noqa: E402  (tests/programs/cases.py)

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
HAS_GPU = targets.cuda_device_present()


@pytest.fixture(autouse=True)
def _no_disk_cache(monkeypatch):
    # a CUDA library cannot be loaded back without a GPU: keep these tests off the disk cache
    monkeypatch.setenv("TCDSL_DISK_CACHE", "0")


_kernels: dict[tuple, tcdsl.Kernel] = {}


def compiled(case: cases.Case, **kw) -> tcdsl.Kernel:
    """The CUDA kernel of a corpus case, compiled once per test session."""
    key = (case.name, repr(sorted(kw.items())))
    if key not in _kernels:
        _kernels[key] = tcdsl.compile(PROGRAMS / case.file, case.entry, target="cuda", **kw)
    return _kernels[key]


def kernel_text(src: str) -> str:
    """The CUDA source from the first kernel on (without TVM's fixed preamble)."""
    i = src.find('extern "C" __global__')
    assert i >= 0, "no __global__ function in the CUDA source"
    return src[i:]


def launches(host: str) -> list[tuple[tuple[str, ...], str, str]]:
    """(enclosing host loop variables, kernel name, grid and block arguments)
    of every ``T.call_ffi_kernel`` in the host TIR, from its indentation."""
    stack: list[tuple[int, str]] = []
    out = []
    for line in host.splitlines():
        s = line.lstrip()
        if not s:
            continue
        indent = len(line) - len(s)
        while stack and indent <= stack[-1][0]:
            stack.pop()
        m = re.match(r"for ([\w, ]+) in (range|T\.grid)\(", s)
        if m:
            stack.append((indent, m.group(1).replace(" ", "")))
            continue
        m = re.search(r'T\.call_ffi_kernel\("(\w+)", (.*), launch_params=\[([^\]]*)\]', s)
        if m:
            grid_block = ", ".join(m.group(2).split(", ")[-2:])
            assert m.group(3) == '"blockIdx.x", "threadIdx.x"', s
            out.append((tuple(v for _, v in stack), m.group(1), grid_block))
    return out


def golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("TCDSL_UPDATE_GOLDENS"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.exists(), f"no golden file {path}; run with TCDSL_UPDATE_GOLDENS=1 to create it"
    expected = path.read_text(encoding="utf-8")
    if expected != text:
        import difflib

        diff = "".join(difflib.unified_diff(expected.splitlines(True), text.splitlines(True), str(path), "actual"))
        pytest.fail(f"CUDA source differs from {path} (TCDSL_UPDATE_GOLDENS=1 rewrites it):\n{diff}", pytrace=False)


# ------------------------------------------------------------- the corpus
# a representative subset by default (every .tc file and tag,
# cases.representative()), the whole corpus under ``-m slow``
@pytest.mark.parametrize("case", cases.params())
def test_corpus_compiles_for_cuda(case):
    k = compiled(case)
    src = k.source_code("cuda")
    assert '__global__' in src
    script = k.script
    bindings = re.findall(r'T\.thread_binding\((.+?), thread="(blockIdx\.x|threadIdx\.x)"\)', script)
    assert bindings, "no thread bindings in the TIR"
    assert {tag for _, tag in bindings} == {"blockIdx.x", "threadIdx.x"}
    if any(extent != "1" for extent, _ in bindings):  # some launch has more than one thread
        assert "threadIdx.x" in src
    symbolic_grids = [e for e, tag in bindings if tag == "blockIdx.x" and not e.isdigit()]
    if symbolic_grids:  # partial blocks under symbolic sizes are guarded
        assert re.search(r"\n +if bx(_\d+)? \* \d+ \+ tx(_\d+)? < ", script), "no 'flat < extent' guard"


RNN_CASES = [c for c in cases.CASES if "rnn" in c.tags]


@pytest.mark.parametrize("case", RNN_CASES, ids=lambda c: c.name)
def test_rnn_launches_are_inside_the_host_loop(case):
    k = compiled(case)
    found = launches(k.source_code("host"))
    inside = [name for loops, name, _ in found if loops]
    assert inside, "no kernel is launched inside the sequential loop"
    # launches outside every loop come from statements outside the program's `for`s (e.g. lstm's hp = h0)
    outside = [name for loops, name, _ in found if not loops]
    top_level_kernels = sum(1 for it in k.frontend.model.body.items if type(it).__name__ == "Kernel")
    assert top_level_kernels or not outside, f"{outside} launched outside the sequential loop"


@pytest.mark.parametrize("file,before,per_step", [("elman.tc", 1, 1), ("qrnn.tc", 3, 1)])
def test_launches_per_step_of_the_examples(file, before, per_step):
    """The numbers docs/cuda.md gives: one launch per time step for both; the
    QRNN's gates for t >= 1 are hoisted (polyhedral/hoist.py): three launches
    for all steps before the loop; the Elman RNN's input projection (a +=
    onto the recurrent sum, split by polyhedral/accumulate.py): one."""
    k = tcdsl.compile(EXAMPLES / file, target="cuda", options={"persistent": False})
    found = launches(k.source_code("host"))
    assert [loops for loops, _, _ in found] == [()] * before + [("t",)] * per_step
    assert all(grid_block.endswith(", 256") for _, _, grid_block in found)
    k = tcdsl.compile(EXAMPLES / file, target="cuda", options={"hoist": False, "persistent": False})
    assert [loops for loops, _, _ in launches(k.source_code("host"))] == [("t",)] * per_step


@pytest.mark.parametrize("file,before", [("elman.tc", 1), ("qrnn.tc", 3), ("lstm.tc", 3)])
def test_single_block_steps_run_in_one_persistent_launch(file, before):
    """Where each step's launches would be single blocks (a condition on the
    sizes), the whole loop is one launch of one block, a barrier after each
    former launch; else the host loop launches every step (docs/cuda.md)."""
    k = tcdsl.compile(EXAMPLES / file, target="cuda")
    host = k.source_code("host")
    found = launches(host)
    loops = [loops for loops, _, _ in found]
    assert loops[:before] == [()] * before and loops[before] == () and ("t",) in loops[before + 1:]
    # one block of `threads` (256) where every phase fits it, else one of `persistent_threads` (1024)
    assert found[before][2] == "1, 256" and found[before + 1][2] == "1, 1024" and loops[before + 1] == ()
    assert re.search(r"if .* <= 256", host) and re.search(r"if .* <= 1024", host)
    src = k.source_code("cuda")
    for threads, launch in ((256, found[before]), (1024, found[before + 1])):
        body = src[src.rindex(f"void __launch_bounds__({threads}) {launch[1]}("):]  # the definition
        body = body[body.index(") {"):body.index("\n}\n")]
        assert "for (int t = 0; t < T; ++t)" in body and body.count("__syncthreads()") >= 1
    off = launches(tcdsl.compile(EXAMPLES / file, target="cuda", options={"persistent": False}).source_code("host"))
    assert len(off) == len(found) - 2 and "__syncthreads" not in \
        tcdsl.compile(EXAMPLES / file, target="cuda", options={"persistent": False}).source_code("cuda")


def persistent_kernels(src: str, threads: int) -> list[str]:
    """The bodies of the persistent kernels in blocks of ``threads`` (those
    running the loop ``for t``)."""
    return [d for d in re.findall(r"__launch_bounds__\(" + str(threads) + r"\) \w+\([^)]*\) \{\n(.*?)\n\}\n", src, re.S)
            if "for (int t = 0; t < T; ++t)" in d]


@pytest.mark.parametrize("file,sums", [("elman.tc", 2), ("qrnn.tc", 3), ("lstm.tc", 1)])
def test_persistent_phases_split_their_sums_into_parts(file, sums):
    """With ``split``, each sum of a step (Elman: its t == 0 and t > 0
    pieces; QRNN: its three gates at t == 0, those of t >= 1 are hoisted;
    LSTM: the recurrent term, the input's is hoisted) is split into parts
    across the block: a shared array per sum, each part's share stored to it,
    a barrier, then part 0 adds the parts' values in a loop over ``parts``
    (codegen/cuda_thread.py); only in blocks of 1024 (``persistent_threads``),
    so that there are as many parts as fit.  The divisions by the sizes that
    give a thread its output and part are computed once, before the loop.
    ``split: False`` or blocks of 256 threads change the launch as documented
    (docs/cuda.md)."""
    k = tcdsl.compile(EXAMPLES / file, target="cuda", options={"split": True})
    src = k.source_code("cuda")
    assert persistent_kernels(src, 256) == []
    [large] = persistent_kernels(src, 1024)
    assert len(re.findall(r"__shared__ .*_part_ptr(_\d+)?\[1024\];", large)) == sums
    body = large[large.index("for (int t = 0"):]
    first, second = body.split("__syncthreads();")[:2]
    assert len(re.findall(r"_part_ptr(_\d+)?\[\(\(int\)threadIdx.x\)\] = ", first)) == sums  # each part's share
    assert "for (int c" in second and re.search(r"_q(_\d+)? < parts\d+_ptr\[0\]; ", second)
    assert len(re.findall(r" \+ \w+_part_ptr(_\d+)?\[", second)) == sums  # part 0 adds the parts' values
    assert re.search(r"part\d+_ptr\[0\] = \(\(\(int\)threadIdx.x\) / max\(", large)  # before the loop
    off = tcdsl.compile(EXAMPLES / file, target="cuda")  # the default: no split
    assert "_part_ptr" not in kernel_text(off.source_code("cuda"))
    small = tcdsl.compile(EXAMPLES / file, target="cuda", options={"persistent_threads": 256})
    assert re.search(r"if .* <= 256", small.source_code("host")) and "__launch_bounds__(1024)" not in \
        small.source_code("cuda")


def test_only_sums_and_products_split():
    """A max reduction, or a loop whose sum reads what its phase writes, keeps
    one thread per output; a product splits."""
    def parts(op: str, also: str = "") -> int:
        k = tcdsl.compile("def f(float(N) h0, float(N,N) w) -> (h) { for t in T {\n"
                          f"  if t == 0 {{ h(t, j) {op} w(j, k) * h0(k) }}\n"
                          f"  else {{ h(t, j) {op} w(j, k) * h(t - 1, k) {also} }} }} }}", target="cuda",
                          options={"split": True, "persistent_threads": 256})  # one persistent launch
        return len(re.findall(r"_part_ptr(_\d+)?\[\(\(int\)threadIdx.x\)\] = ", kernel_text(k.source_code("cuda"))))
    assert parts("+=!") == 2 and parts("*=!") == 2  # both pieces
    assert parts("max=!") == 0 and parts("min=!") == 0
    # the second sum also reads the element it accumulates (through h(t - 1, k) at k = j, t = 1)
    assert parts("+=!", "+ h(t, j)") == 1


@pytest.mark.parametrize("persistent", [True, False])
@pytest.mark.parametrize("name", [c.name for c in RNN_CASES])
def test_persistent_mapping_emulated_on_cpu(name, persistent):
    """The persistent launch, its phases run one after the other on the CPU:
    1024 threads make every size of the corpus case take it."""
    from tcdsl import driver
    from tcdsl.source import Source

    case = cases.by_name(name)
    fe = driver.frontend(Source((PROGRAMS / case.file).read_text(encoding="utf-8"), str(case.file)), case.entry)
    script = Emulated(fe, target="llvm", options={"threads": 1024, "persistent": persistent}).script
    assert ("<= 1024" in script) == persistent
    run_emulated(case, threads=1024, persistent=persistent)


@pytest.mark.parametrize("name", ["elman.tc", "qrnn.tc"])
def test_golden_rnn_kernels(name):
    k = tcdsl.compile(EXAMPLES / name, target="cuda")
    golden(name.replace(".tc", ".cu"), kernel_text(k.source_code("cuda")))


NVCC_SUBSET = ["elman_rnn", "qrnn_fo", "matmul", "convolution", "builtins", "lstm", "relu", "masked_convolve"]


@needs_nvcc
@pytest.mark.parametrize("name", NVCC_SUBSET)
def test_nvcc_compiles(name):
    k = compiled(cases.by_name(name))
    assert targets.nvcc_compile(k.source_code("cuda"), k.target)


@needs_nvcc
@pytest.mark.slow
@pytest.mark.parametrize("case", cases.CASES, ids=lambda c: c.name)
def test_nvcc_compiles_the_corpus(case):
    k = compiled(case)
    assert targets.nvcc_compile(k.source_code("cuda"), k.target)


@needs_nvcc
def test_no_fast_math():
    """tanhf stays tanhf: nvcc runs without --use_fast_math (tanh.approx.f32)."""
    k = tcdsl.compile(EXAMPLES / "elman.tc", target="cuda")
    before = os.environ.get("TVM_CUDA_NVCC_NO_FAST_MATH")
    ptx = targets.nvcc_compile(k.source_code("cuda"), k.target, target_format="ptx").decode()
    assert ".entry elman_rnn_kernel" in ptx
    assert "tanh.approx" not in ptx  # with --use_fast_math, tanhf becomes tanh.approx.f32
    assert os.environ.get("TVM_CUDA_NVCC_NO_FAST_MATH") == before  # the setting does not leak


# ------------------------------------- the mapping, emulated on the CPU
class Emulated(tcdsl.Kernel):
    """The CUDA mapping built for the CPU: thread-bound loops become serial
    loops (threads run one after the other), everything else as on the GPU."""

    def backend(self, sizes=None):
        from tcdsl import driver

        fixed = {**self.fixed, **(sizes or {})}
        return driver.backend(self.frontend, fixed, target_kind="cuda", options={**self.options, "emulate": True})


def run_emulated(case: cases.Case, **options) -> None:
    from tcdsl import driver
    from tcdsl.source import Source

    fe = driver.frontend(Source((PROGRAMS / case.file).read_text(encoding="utf-8"), str(case.file)), case.entry)
    k = Emulated(fe, target="llvm", options={"threads": 4, **options})  # 4: several blocks, partial ones
    assert "thread_binding" not in k.script
    for i, sizes in enumerate(case.sizes):
        inputs = case.make_inputs(np.random.default_rng(i), **sizes)
        got = k(*inputs)
        got = got if isinstance(got, tuple) else (got,)
        for g, w in zip(got, case.reference(*inputs)):
            assert g.shape == w.shape and g.dtype == w.dtype
            np.testing.assert_allclose(g, w, rtol=case.rtol, atol=case.atol, err_msg=f"sizes {sizes}")


EMULATED = [c.name for c in RNN_CASES] + ["matmul", "convolution", "tcg", "scalar_reduce", "two_copies",
                                          "softmax_fused", "builtins", "lut", "prefix_sum", "group_normalization"]


@pytest.mark.parametrize("name", EMULATED)
def test_mapping_emulated_on_cpu(name):
    run_emulated(cases.by_name(name))


@pytest.mark.parametrize("name", ["elman_rnn", "matmul", "convolution"])
def test_mapping_emulated_without_registers(name):
    run_emulated(cases.by_name(name), registers=False)


@pytest.mark.slow
@pytest.mark.parametrize("case", cases.CASES, ids=lambda c: c.name)
def test_corpus_emulated_on_cpu(case):
    run_emulated(case)


def test_accumulators_in_registers():
    k = tcdsl.compile("def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }", target="cuda")
    src = k.source_code("cuda")
    assert "float C_acc_ptr[1];" in src
    assert re.search(r"for \(int c2 = 0; c2 < K; \+\+c2\) \{\n\s+C_acc_ptr\[0\] = \(C_acc_ptr\[0\] \+", src)
    # hidden(t-1, b, c) is provably not hidden(t, b, co) (the recurrent sums, and the hoisted input
    # projection's, polyhedral/accumulate.py; without the persistent launch, which has the sums once more)
    k = tcdsl.compile(EXAMPLES / "elman.tc", target="cuda", options={"persistent": False})
    assert k.script.count("hidden_acc = hidden_acc + ") == 2 and k.script.count("hidden_in_acc = hidden_in_acc + ") == 1
    # a read that may alias the accumulated element keeps it in memory
    k = tcdsl.compile("def f(float(N) A, int32(N) I) -> (O) { O(i) = A(i)\n O(i) += O(I(j)) * A(j) }",
                      target="cuda")
    # (the indirect read is clamped into O, and gives 0 if O is empty)
    assert ("O[c0] = O[c0] + T.if_then_else(N > 0, O[T.max(T.min(I_1[c1], N - 1), 0)], T.float32(0.0)) * A[c1]"
            in k.script and "_acc" not in k.script)


# --------------------------------------------------------- the mapping
def _host(src: str, **kw) -> tuple[tcdsl.Kernel, list]:
    k = tcdsl.compile(src, target="cuda", **kw)
    return k, launches(k.source_code("host"))


def test_unmapped_statement_runs_on_one_device_thread():
    k, found = _host("def s(float(N) A) -> (O) { O +=! A(i) }")
    assert [(loops, gb) for loops, _, gb in found] == [((), "1, 1")]
    src = k.source_code("cuda")
    assert "for (int c0 = 0; c0 < N; ++c0)" in src  # the reduction loop, serial on the device


def test_two_top_level_statements_get_two_launches():
    k, found = _host("def f(float(N) A, float(M) B) -> (X, Y) { X(i) = A(i) + 1\n Y(j) = B(j) * 2 }")
    assert len(found) == 2
    assert len(re.findall(r"__global__ void .*\) \{", k.source_code("cuda"))) == 2  # definitions


def test_fused_statements_share_a_launch():
    k, found = _host("def f(float(N,K) A) -> (S, R) { S(i) +=! A(i,k)\n R(i) = S(i) * 2 }")
    assert len(found) == 1


def test_matmul_maps_both_parallel_loops_and_guards():
    k = tcdsl.compile("def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }", target="cuda")
    script = k.script
    assert 'T.thread_binding((M * N + 255) // 256, thread="blockIdx.x")' in script
    assert "if bx * 256 + tx < M * N:" in script
    src = k.source_code("cuda")
    assert "__launch_bounds__(256)" in src and "for (int c2 = 0; c2 < K; ++c2)" in src


def test_mapping_options():
    src = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }"
    k = tcdsl.compile(src, target="cuda", options={"threads": 128})
    assert "__launch_bounds__(128)" in k.source_code("cuda")
    k = tcdsl.compile(src, target="cuda", options={"flatten": 1})
    assert 'T.thread_binding((M + 255) // 256, thread="blockIdx.x")' in k.script  # n stays a serial loop
    for bad in ({"threads": 0}, {"threads": 2048}, {"threads": "64"}, {"flatten": 0}):
        with pytest.raises(tcdsl.TcError, match="options"):
            tcdsl.compile(src, target="cuda", options=bad)


def test_constant_sizes_drop_the_guard():
    k = tcdsl.compile("def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }",
                      target="cuda", sizes={"M": 64, "N": 32, "K": 8})
    script = k.script
    assert 'T.thread_binding(8, thread="blockIdx.x")' in script and "if bx" not in script
    k = tcdsl.compile("def v(float(N) A) -> (B) { B(i) = A(i) * 2 }", target="cuda", sizes={"N": 5})
    assert 'T.thread_binding(5, thread="threadIdx.x")' in k.script  # fewer threads than the default


def test_dependence_carrying_loop_with_parallel_body_is_a_host_loop(monkeypatch):
    """With isl's most fused schedule, tcg (tests/programs/inference.tc) has a
    serial loop outermost: it runs on the host, launching its parallel body
    at every iteration (gpu_schedule.schedule normally prefers a schedule with
    outer parallelism for it; keeping the fused one exercises the host loop)."""
    from tcdsl.polyhedral import gpu_schedule

    monkeypatch.setattr(gpu_schedule, "outer_parallelism", lambda node: 2)
    case = cases.by_name("tcg")
    found = launches(tcdsl.compile(PROGRAMS / case.file, case.entry, target="cuda",
                                   options={"persistent": False}).source_code("host"))
    assert len(found) == 2 and all(loops == ("c0",) for loops, _, _ in found)
    run_emulated(case)


def test_schedule_with_outer_parallelism_is_preferred():
    """isl fuses the LSTM step into one band parallel in b only; the GPU
    schedule splits it into launches parallel in (g, b, j) and (b, j)."""
    found = launches(compiled(cases.by_name("lstm"), options={"hoist": False, "persistent": False})
                     .source_code("host"))
    in_loop = [gb for loops, _, gb in found if loops == ("t",)]
    assert len(in_loop) == 8 and not any("(B + 255) // 256" in gb for gb in in_loop)
    # hoisted, the input projection x(t) * Wx is one launch before the loop
    found = launches(compiled(cases.by_name("lstm"), options={"persistent": False}).source_code("host"))
    assert [loops for loops, _, _ in found].count(()) == 3  # hp = h0, cp = c0, gates(t, g, b, j) +=! x * Wx
    assert [loops for loops, _, _ in found].count(("t",)) == 6


def test_statement_left_on_the_host_is_an_internal_error():
    import tvm
    from tvm import tirx

    n = tirx.Var("n", "int32")
    a = tirx.decl_buffer((n,), "float32", name="A")
    i = tirx.Var("i", "int32")
    f = tirx.PrimFunc([a], tirx.For(i, 0, n, tirx.ForKind.SERIAL,
                                    tirx.BufferStore(a, tirx.const(1.0, "float32"), [i])))
    f = f.with_attr("global_symbol", "k")
    with pytest.raises(InternalError, match=r"outside thread bindings \(A\)"):
        targets.build(f, targets.make_target("cuda"))
    assert isinstance(targets.make_target("cuda"), tvm.target.Target)


# ------------------------------------------------------ API and command line
def test_compile_and_inspect_without_gpu():
    k = tcdsl.compile(EXAMPLES / "elman.tc", target="cuda")
    assert repr(k) == "<tcdsl.Kernel elman_rnn target=cuda specialize=never>"
    assert "T.thread_binding" in k.script
    assert "extern \"C\" __global__" in k.source_code("cuda")
    assert "T.call_ffi_kernel" in k.source_code("host")
    with pytest.raises(tcdsl.TcError, match="target='cuda'"):
        tcdsl.compile(EXAMPLES / "elman.tc").source_code("cuda")


@pytest.mark.skipif(HAS_GPU, reason="a GPU is present")
def test_call_without_gpu_is_a_clear_error():
    k = tcdsl.compile("def f(float(N) A) -> (B) { B(i) = A(i) * 2 }", target="cuda")
    with pytest.raises(tcdsl.TcError, match="no CUDA device"):
        k(np.ones(4, np.float32))
    with pytest.raises(tcdsl.TcShapeError):  # argument checks still come first
        k(np.ones((2, 2), np.float32))


def test_cli_emits_cuda_and_tir(capsys, tmp_path):
    from tcdsl.cli import main

    assert main(["compile", str(EXAMPLES / "qrnn.tc"), "--target", "cuda", "--emit", "cuda"]) == 0
    out = capsys.readouterr().out
    assert "__global__ void __launch_bounds__(256) qrnn_kernel" in out and "threadIdx.x" in out
    assert main(["compile", str(EXAMPLES / "qrnn.tc"), "--target", "cuda", "--emit", "tir"]) == 0
    out = capsys.readouterr().out
    assert 'thread="blockIdx.x"' in out and "for t in range" in out


# -------------------------------------------------- numerics (need a GPU)
@pytest.mark.cuda
@pytest.mark.parametrize("case", cases.CASES, ids=lambda c: c.name)
def test_corpus_on_gpu(case):
    k = compiled(case)
    for i, sizes in enumerate(case.sizes):
        inputs = case.make_inputs(np.random.default_rng(i), **sizes)
        got = k(*inputs)
        got = got if isinstance(got, tuple) else (got,)
        want = case.reference(*inputs)
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.dtype == w.dtype
            np.testing.assert_allclose(g, w, rtol=case.rtol, atol=case.atol, err_msg=f"sizes {sizes}")


TARGETS = ["llvm", pytest.param("cuda", marks=pytest.mark.cuda)]
_examples: dict[tuple[str, str, bool], tcdsl.Kernel] = {}


def example(file: str, target: str, split: bool = False) -> tcdsl.Kernel:
    """An example of examples/rnn, compiled once per target and test session
    (its binary serves every size)."""
    if (file, target, split) not in _examples:
        _examples[file, target, split] = tcdsl.compile(EXAMPLES / file, target=target, options={"split": split})
    return _examples[file, target, split]


@pytest.mark.parametrize("target,split", [("llvm", False), pytest.param("cuda", False, marks=pytest.mark.cuda),
                                          pytest.param("cuda", True, marks=pytest.mark.cuda)])
@pytest.mark.parametrize("T,B,C", [(1, 1, 1), (9, 1, 5), (5, 3, 7), (16, 4, 33), (7, 3, 90), (4, 6, 90),
                                   (3, 4, 300)])
def test_elman_and_qrnn(target, split, T, B, C):
    """On CUDA all but the last size run the persistent launch, in a block
    of 256 threads (B * C <= 256) or of 1024 (the last but two), the last
    the host loop; with ``split``, in blocks of 1024, the recurrent sums in
    32, 32, 32, 4 and 2 parts, then (540 outputs) one thread per output."""
    sys.path.insert(0, str(EXAMPLES))
    import reference

    rng = np.random.default_rng(T * 100 + B * 10 + C)
    r = lambda *s: (rng.standard_normal(s) / np.sqrt(max(C, 1))).astype(np.float32)  # noqa: E731
    elman = example("elman.tc", target, split)
    inputs = [r(T, B, C), r(B, C), r(C, C), r(C, C)]
    np.testing.assert_allclose(elman(*inputs), reference.elman_rnn(*inputs), rtol=1e-5, atol=1e-5)
    qrnn = example("qrnn.tc", target, split)
    inputs = [r(T, B, C), r(3, C, C), r(3, C, C), r(3, C)]
    for got, want in zip(qrnn(*inputs), reference.qrnn(*inputs)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target", TARGETS)
def test_out_accumulates_and_zero_sizes(target):
    k = tcdsl.compile("def acc(float(N) A) -> (O) { O(i) += A(i) }", target=target)
    A = np.arange(4, dtype=np.float32)
    out = np.full(4, 10, dtype=np.float32)
    assert k(A, out=out) is out
    np.testing.assert_array_equal(out, A + 10)
    assert k(np.zeros(0, np.float32)).shape == (0,)


SPLIT_OPTIONS = [{"split": True}, {"split": True, "persistent_threads": 64}, {"persistent_threads": 256}]


@pytest.mark.cuda
@pytest.mark.parametrize("options", SPLIT_OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
@pytest.mark.parametrize("case", RNN_CASES, ids=lambda c: c.name)
def test_rnns_with_and_without_split_sums_on_gpu(case, options):
    """Every RNN of the corpus, its sums split into parts (blocks of 1024
    threads; of 64, where most of the corpus's sizes take the host loop) or
    in blocks of 256 threads alone, against NumPy; the default options are
    test_corpus_on_gpu's."""
    k = compiled(case, options=options)
    for i, sizes in enumerate(case.sizes):
        inputs = case.make_inputs(np.random.default_rng(i), **sizes)
        got = k(*inputs)
        got = got if isinstance(got, tuple) else (got,)
        for g, w in zip(got, case.reference(*inputs)):
            np.testing.assert_allclose(g, w, rtol=case.rtol, atol=case.atol, err_msg=f"sizes {sizes}")


@pytest.mark.cuda
def test_torch_cuda_tensors_stay_on_the_device():
    torch = pytest.importorskip("torch")
    k = tcdsl.compile("def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }", target="cuda")
    a, b = torch.randn(33, 17, device="cuda"), torch.randn(17, 9, device="cuda")
    c = k(a, b)
    assert c.device == a.device
    torch.testing.assert_close(c, a @ b, rtol=1e-5, atol=1e-5)
    out = torch.zeros(33, 9, device="cuda")
    assert k(a, b, out=out) is out
    torch.testing.assert_close(out, a @ b, rtol=1e-5, atol=1e-5)
    c = k(a.cpu(), b.cpu())  # CPU tensors: copied over and back
    assert c.device.type == "cpu"


def test_host_arrays_keep_their_shape():
    """What is copied to the GPU has the argument's shape: a 0-d array (a
    scalar input or output) stays 0-d (``np.ascontiguousarray`` makes it
    1-d, which the kernel refused on a GPU: "Mismatched ndim ... expected 0"),
    a strided array becomes contiguous."""
    from tcdsl.runtime.device import host_array

    for x in (np.float32(2.5), np.array(3, np.int32), np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]):
        h = host_array(x)
        assert h.shape == np.shape(x) and h.flags.c_contiguous
        np.testing.assert_array_equal(h, x)
    torch = pytest.importorskip("torch")
    assert host_array(torch.tensor(1.5)).shape == ()


@pytest.mark.cuda
@pytest.mark.parametrize("on_gpu", [False, True], ids=["numpy", "torch-cuda"])
def test_scalar_inputs_and_outputs(on_gpu):
    k = tcdsl.compile("def f(float(N) A, float s) -> (B, total) { B(i) = A(i) * s\n total +=! A(i) }",
                      target="cuda")
    A, s = np.arange(5, dtype=np.float32), np.float32(3)
    if on_gpu:
        torch = pytest.importorskip("torch")
        B, total = k(torch.from_numpy(A).cuda(), torch.tensor(s).cuda())
        B, total = B.cpu().numpy(), total.cpu().numpy()
    else:
        B, total = k(A, s)
    np.testing.assert_allclose(B, A * 3)
    assert np.shape(total) == () and float(total) == 10.0


@pytest.mark.parametrize("case", cases.params())
def test_temporaries_are_parameters_of_the_shape_the_runtime_allocates(case):
    """On CUDA the caller allocates the temporaries (runtime/device.py): the
    host function takes them after the outputs, each of the shape that the
    runtime's signature computes for the call's sizes."""
    from tvm import sym, tirx

    k = compiled(case)
    b = k.backend()
    assert tuple(o.name for o in k.signature.scratch) == b.signature.scratch == tuple(k.frontend.checked.temps)
    assert len(b.func.params) == len(b.signature.sizes) + len(k.signature.inputs) + len(k.signature.outputs) \
        + len(k.signature.scratch)
    shapes = compile_shapes([o.shape for o in k.signature.scratch])
    for sizes in case.sizes:
        an = sym.Analyzer()
        for s, v in b.signature.size_vars.items():
            if isinstance(v, tirx.Var):
                an.bind(v, tirx.const(sizes[s], "int32"))
        for name, want in zip(b.signature.scratch, shapes(sizes)):
            buf = b.signature.buffers[name]
            assert tuple(int(an.simplify(e)) for e in buf.shape) == want, (name, sizes)


def test_lstm_host_function_allocates_nothing():
    k = example("lstm.tc", "cuda")
    assert [o.name for o in k.signature.scratch] == ["hp", "cp", "gates"]
    assert "alloc_buffer" not in k.source_code("host")
    # the emulated mapping (a CPU build) allocates them inside, as the CPU does
    em = Emulated(k.frontend, target="llvm")
    assert not em.signature.scratch and "alloc_buffer" in em.script


@pytest.mark.cuda
def test_a_call_replays_from_a_cuda_graph():
    """A call on PyTorch CUDA tensors launches on PyTorch's current stream and
    takes its temporaries from PyTorch's allocator, so ``torch.cuda.graph``
    captures it (docs/cuda.md): the replay reads the inputs' current values
    and writes ``out=`` -- also after calls of other sizes in between, whose
    temporaries are larger (from TVM's workspace pool, which frees a page to
    grow it, the graph's temporaries would have been freed memory)."""
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(EXAMPLES))
    import reference

    k = example("lstm.tc", "cuda")
    rng = np.random.default_rng(7)

    def inputs(T, B, I, H):
        return [(rng.standard_normal(s) / 3).astype(np.float32)
                for s in ((T, B, I), (B, H), (B, H), (4, I, H), (4, H, H), (4, H))]

    host = inputs(6, 3, 5, 10)
    dev = [torch.from_numpy(a).cuda() for a in host]
    h, c = torch.zeros(6, 3, 10, device="cuda"), torch.zeros(6, 3, 10, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        k(*dev, out=(h, c))  # warm-up outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        k(*dev, out=(h, c))
    for step in range(3):
        big = [torch.from_numpy(a).cuda() for a in inputs(20 + 10 * step, 16, 64, 96)]
        k(*big)  # larger temporaries, between capture and replay
        host[0] = (rng.standard_normal((6, 3, 5)) / 3).astype(np.float32)
        dev[0].copy_(torch.from_numpy(host[0]))
        h.zero_()
        graph.replay()
        torch.cuda.synchronize()
        want = reference.lstm(*host)
        np.testing.assert_allclose(h.cpu().numpy(), want[0], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(c.cpu().numpy(), want[1], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("options", [{}, {"split": True}], ids=["default", "split"])
def test_step_kernel_benchmark_reads_the_launch_arguments(options):
    """benchmarks/cuda_step_kernels.py launches tcdsl's persistent kernels
    itself: the arguments it reads off the host TIR are the four tensors and
    the sizes the kernel's parameters name (B * Co for ``cse_v2``)."""
    sys.path.insert(0, str(EXAMPLES.parent.parent / "benchmarks"))
    import cuda_step_kernels as bench

    k = tcdsl.compile(EXAMPLES / "elman.tc", target="cuda", options=options)
    calls, env = bench.host_calls(k.source_code("host"), {"T_1": 7, "B": 3, "Ci": 5, "Co": 5})
    found = bench.persistent_kernels(k.source_code("cuda"))
    assert [threads for _, threads in found] == ([1024] if options else [256, 1024])
    for name, threads in found:
        args, block = calls[name]
        assert block == str(threads)
        tensors = [re.fullmatch(r"(\w+?)(_\d+)?\.data", a) for a in args[:4]]
        assert [m.group(1) for m in tensors] == ["h0", "h2h", "hidden", "hidden_in"]
        params = re.search(name + r"\(([^)]*)\)", k.source_code("cuda")).group(1).split(", ")[4:]
        values = {p.split()[-1]: eval(a, {}, dict(env)) for p, a in zip(params, args[4:])}
        assert values["B"] == 3 and values["Co"] == 5 and values["T"] == 7 and values.get("cse_v2", 15) == 15


@needs_nvcc
def test_hand_written_step_kernels_compile(tmp_path):
    """The hand-written kernels the step benchmark sets against tcdsl's."""
    src = EXAMPLES.parent.parent / "benchmarks" / "cuda_step_kernels.cu"
    import subprocess
    r = subprocess.run(["nvcc", "-arch=sm_90", "-std=c++17", "-c", str(src), "-o", str(tmp_path / "k.o")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.mark.cuda
def test_autotune_measures_cuda_candidates_on_the_gpu(tmp_path):
    """``tcdsl.autotune(target="cuda")`` without ``rpc``: every candidate is
    run on this machine's GPU (not on the CPU device), checked against the
    default kernel, recorded under the target "cuda"; compile then uses the
    options found, and they compute the Elman RNN."""
    from tcdsl.tune.database import Database

    sys.path.insert(0, str(ROOT / "tests"))
    from helpers import elman_inputs, reference

    sizes = {"T": 12, "B": 4, "Ci": 16, "Co": 48}
    db = tmp_path / "t.sqlite"
    result = tcdsl.autotune(EXAMPLES / "elman.tc", sizes=sizes, trials=6, target="cuda", database=db,
                            progress=False, workers=4)
    assert result.trials[0].options == {} and result.trials[0].ok, result.trials[0]
    assert sum(t.ok for t in result.trials) >= 3, [(t.options, t.error) for t in result.trials]
    r, = result.per_size
    assert r.speedup >= 1.0 and r.seconds > 0
    rows = list(Database(db))
    assert rows and {row["target"] for row in rows} == {"cuda"} and all(row["seconds"] > 0 for row in rows)
    k = tcdsl.compile(EXAMPLES / "elman.tc", target="cuda", tuning_db=db)
    opts, origin = k.options_for(**sizes)
    assert origin == "tuned at T=12,B=4,Ci=16,Co=48" and opts == tcdsl.MappingOptions(**result.best)
    args = elman_inputs(np.random.default_rng(1), *sizes.values())
    np.testing.assert_allclose(k(*args), reference.elman_rnn(*args), rtol=1e-4, atol=1e-5)
