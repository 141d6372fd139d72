"""The ``tcdsl`` command line (SPEC 3): ``check``, ``compile --emit``, ``run``,
and user errors on stderr without a traceback (Triton ``test_compile_errors.py``)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tcdsl.cli import main

MATMUL = """# a comment
def matmul(float(N, K) A, float(K, M) B) -> (O) {
  O(i, j) +=! A(i, k) * B(k, j)
}
"""
ELMAN_PATH = Path(__file__).resolve().parents[1] / "examples" / "rnn" / "elman.tc"
ELMAN = ELMAN_PATH.read_text(encoding="utf-8")
TWO_DEFS = MATMUL + """
def scale(float(N) A, float s) -> (B) {
  B(i) = A(i) * s
}
"""
SYNTAX_ERROR = "def f(float(N) A) -> (B) {\n  B(i) = A(i) +\n}\n"  # 3:1
SEMANTIC_ERROR = "def f(float(N) A) -> (B) {\n  B(i) = A(i) * Z(i)\n}\n"  # 2:17


@pytest.fixture
def write(tmp_path):
    def write(text: str, name: str = "prog.tc") -> str:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return str(path)
    return write


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def assert_user_error(rc: int, out: str, err: str, prefix: str) -> None:
    assert rc == 1
    assert err.startswith(prefix), err
    assert "Traceback" not in err and '.py"' not in err, err
    assert out == ""


# ------------------------------------------------------------------- check
def test_check_ok(capsys, write):
    path = write(TWO_DEFS)
    rc, out, err = run_cli(capsys, "check", path)
    assert (rc, err) == (0, "")
    assert out == f"{path}: ok (matmul, scale)\n"


def test_check_counts_its_warnings(capsys, write):
    path = write("""def shift(float(N) A, float(M) C) -> (B) {
  B(i) = A(i + 1) + C(i) where i in 0:M
}
def twice(float(N) A, float(M) C) -> (B) {
  B(i) = A(i + 2) + C(i) where i in 0:M
}""")
    rc, out, err = run_cli(capsys, "check", path)
    assert rc == 0 and out == f"{path}: ok (shift, twice), 2 warnings\n"
    assert err.count(": warning: 'A' may be read out of bounds") == 2
    assert f"{path}:2:10: warning" in err and f"{path}:5:10: warning" in err


@pytest.mark.parametrize("text, loc", [(SYNTAX_ERROR, "3:1"), (SEMANTIC_ERROR, "2:17")])
def test_check_reports_located_errors(capsys, write, text, loc):
    path = write(text)
    rc, out, err = run_cli(capsys, "check", path)
    assert_user_error(rc, out, err, f"{path}:{loc}: ")
    line, col = map(int, loc.split(":"))
    _, src_line, caret = err.rstrip("\n").split("\n")
    assert src_line == text.splitlines()[line - 1]
    assert caret == " " * (col - 1) + "^" * len(caret.strip())


def test_check_finds_errors_in_every_def(capsys, write):
    path = write(MATMUL + "\ndef bad(float(N) A) -> (B) {\n  B(i) = A(i, i)\n}\n")
    rc, out, err = run_cli(capsys, "check", path)
    assert_user_error(rc, out, err, f"{path}:7:10: 'A' has 1 dimension, but 2 indices are given")


# ----------------------------------------------------------------- compile
@pytest.mark.parametrize("emit, pattern", [
    ("tir", r"@T\.prim_func\s+def matmul\("),
    ("schedule", r"S0_init\[i, j\].*S0\[i, j, k\]"),
    ("ast", r"^\(Def :name 'matmul' .*:reduction_vars \('k'\)"),
    ("ranges", r"(?m)^O: \[N, M\]$"),
    ("isl-ast", r"for \(int c\d = 0; c\d < [NMK]; c\d \+= 1\)"),
])
def test_compile_emit(capsys, write, emit, pattern):
    rc, out, err = run_cli(capsys, "compile", write(MATMUL), "--emit", emit)
    assert (rc, err) == (0, "")
    assert re.search(pattern, out, re.S), out


def test_compile_default_is_tir(capsys, write):
    path = write(MATMUL)
    _, default, _ = run_cli(capsys, "compile", path)
    _, tir, _ = run_cli(capsys, "compile", path, "--emit", "tir")
    assert default == tir and "T.prim_func" in tir


def test_compile_entry_and_output_file(capsys, write, tmp_path):
    out_file = tmp_path / "scale.py"
    rc, out, err = run_cli(capsys, "compile", write(TWO_DEFS), "--entry", "scale", "-o", str(out_file))
    assert (rc, out, err) == (0, "", "")
    assert re.search(r"def scale\(", out_file.read_text())


def test_compile_specialized(capsys, write):
    rc, out, err = run_cli(capsys, "compile", write(MATMUL), "--specialize", "before-scheduling",
                           "--sizes", "N=4,K=3,M=5", "--emit", "tir")
    assert (rc, err) == (0, "")
    assert "T.prim_func" in out and "N: T.int32" not in out


@pytest.mark.parametrize("options", ["tile_rows=2,tile_cols=16,steps_inside=false,hoist=true",
                                     '{"tile_rows": 2, "tile_cols": 16, "steps_inside": false, "hoist": true}'])
def test_compile_options(capsys, write, options):
    rc, out, err = run_cli(capsys, "compile", write(ELMAN, "elman.tc"), "--options", options)
    assert (rc, err) == (0, "")
    assert "T.alloc_buffer((2, 16))" in out
    # (between them only the chunk size's bindings, codegen/cpu_strips.opaque)
    assert re.search(r"for t in range\(.*\):\s+(c0_ck\S*: .*\n\s+)*for c0_chunk in T\.parallel", out)


def test_run_options_keep_results(capsys, write):
    path = write(ELMAN, "elman.tc")
    argv = ("run", path, "--sizes", "T=4,B=7,Ci=3,Co=37")
    plain = run_cli(capsys, *argv)[1]
    rc, out, err = run_cli(capsys, *argv, "--options", "tile_rows=1,register_tiles=false,parallel=false")
    assert (rc, err) == (0, "")
    assert out == plain


def test_compile_elman_ranges(capsys, write):
    rc, out, err = run_cli(capsys, "compile", write(ELMAN, "elman.tc"), "--emit", "ranges")
    assert (rc, err) == (0, "")
    assert re.search(r"(?m)^hidden: \[T, B, Co\]$", out), out


# --------------------------------------------------------------------- run
def test_run_prints_shapes_and_checksums(capsys, write):
    path = write(ELMAN, "elman.tc")
    argv = ("run", path, "--sizes", "T=4,B=2,Ci=3,Co=5", "--seed", "1")
    rc, out, err = run_cli(capsys, *argv)
    assert (rc, err) == (0, "")
    assert re.fullmatch(r"hidden: shape \(4, 2, 5\) float32 sum -?[0-9.e+-]+\n", out), out
    assert run_cli(capsys, *argv)[1] == out  # the seed fixes the inputs
    assert run_cli(capsys, "run", path, "--sizes", "T=4,B=2,Ci=3,Co=5", "--seed", "2")[1] != out


def test_run_with_entry(capsys, write):
    rc, out, err = run_cli(capsys, "run", write(TWO_DEFS), "--entry", "matmul", "--sizes", "N=2,K=3,M=4")
    assert (rc, err) == (0, "")
    assert out.startswith("O: shape (2, 4) float32 sum ")


# --------------------------------------------------------------- C source
C_MATH = """def f(float(N) A, double(N) B, half(N) H) -> (O, P, Q) {
  O(i) = tanh(A(i)) + fabs(A(i)) + floor(A(i)) + pow(A(i), 3.5f) + sigmoid(A(i))
  P(i) = exp(B(i)) + log(fabs(B(i)) + 1) + sqrt(fabs(B(i))) + ceil(B(i))
  Q(i) = tanh(H(i)) + fabs(H(i))
}
"""


@pytest.mark.parametrize("program", ["matmul", "math", "elman"])
def test_compile_emit_c_is_c(capsys, write, program):
    # it printed LLVM IR; now TVM's c target, math builtins included
    path = write({"matmul": MATMUL, "math": C_MATH, "elman": ELMAN}[program])
    entry = ["--entry", "matmul"] if program == "matmul" else []
    rc, out, err = run_cli(capsys, "compile", path, *entry, "--emit", "c")
    assert (rc, err) == (0, "")
    assert out.startswith('// tvm target: {"kind":"c"') and "#include <math.h>" in out, out[:300]
    assert re.search(r"TVM_DLL int32_t __tvm_ffi_(matmul|f|elman_rnn)\(", out)
    assert "ModuleID" not in out and "\ndefine " not in out
    if program == "math":
        assert all(f in out for f in ("fabsf(", "floorf(", "powf(", "exp(", "log(", "sqrt(", "ceil(")), out


@pytest.mark.skipif(not __import__("shutil").which("gcc"), reason="needs gcc")
def test_compile_emit_c_compiles(capsys, write, tmp_path):
    import tvm
    import tvm_ffi

    # without half: TVM's C target uses a type 'half' that the C does not define
    no_half = C_MATH.replace(", half(N) H) -> (O, P, Q)", ") -> (O, P)").replace("  Q(i) = tanh(H(i)) + fabs(H(i))\n", "")
    rc, out, _ = run_cli(capsys, "compile", write(no_half), "--emit", "c", "-o", str(tmp_path / "k.c"))
    assert rc == 0
    includes = [Path(m.__file__).parent / "include" for m in (tvm, tvm_ffi)]
    proc = subprocess.run(["gcc", "-std=c11", "-fsyntax-only", "-Werror=implicit-function-declaration",
                           *(f"-I{d}" for d in includes), str(tmp_path / "k.c")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_compile_emit_c_with_sizes(capsys, write):
    rc, out, err = run_cli(capsys, "compile", write(MATMUL), "--entry", "matmul", "--specialize",
                           "before-scheduling", "--sizes", "N=4,K=3,M=5", "--emit", "c")
    assert (rc, err) == (0, "")
    # the sizes are constants in the loops: K = 3 (the reduction), M = 5 (the columns)
    assert re.search(r"< 3; \+\+c\d_k", out) and re.search(r"< 5; \+\+c\d", out) and "num_args == 3" in out, out


def test_run_checked(capsys, write):
    path = write("def lut(float(M) T, int32(N) I) -> (O) {\n  O(i) = T(I(i))\n}\n")
    rc, out, err = run_cli(capsys, "run", path, "--sizes", "M=8,N=5", "--options", "checked=true")
    assert (rc, err) == (0, ""), err
    assert out.startswith("O: shape (5,) float32 sum ")
    rc, out, err = run_cli(capsys, "run", path, "--sizes", "M=2,N=50", "--seed", "3", "--options", "checked=true")
    assert_user_error(rc, out, err, f"{path}:2:12: 'T' is read out of bounds: its index along dimension 0 "
                                    "is not in [0, 2)\n  O(i) = T(I(i))\n")


# ------------------------------------------------------------- user errors
@pytest.mark.parametrize("argv, prefix", [
    (("compile", "{syntax}"), "{syntax}:3:1: unexpected '}}'; expected an expression"),
    (("compile", "{semantic}", "--emit", "ast"), "{semantic}:2:17: unknown tensor or function 'Z'"),
    (("run", "{semantic}", "--sizes", "N=3"), "{semantic}:2:17: "),
    (("compile", "{two}"), "{two}:6:5: the source defines 2 functions (matmul, scale)"),
    (("compile", "{two}", "--entry", "nope"), "{two}:2:5: no function named 'nope'"),
    (("run", "{two}", "--entry", "matmul", "--sizes", "N=2,K=3"), "error: --sizes is missing M"),
    (("run", "{two}", "--entry", "matmul", "--sizes", "N=two"), "error: --sizes: expected NAME=INT"),
    (("check", "{missing}"), "error: {missing}: No such file or directory"),
    (("compile", "{two}", "--entry", "matmul", "--options", "tile_rows"), "error: --options: expected NAME=VALUE"),
    (("compile", "{two}", "--entry", "matmul", "--options", "tile_rows=big"),
     "error: options: 'tile_rows' must be a positive integer, got 'big'"),
    (("compile", "{two}", "--entry", "matmul", "--options", "fusion=outr"),
     "error: options: 'fusion' must be one of 'auto', 'isl', 'outer', 'none', got 'outr'"),
    (("compile", "{two}", "--entry", "matmul", "--options", "{{bad"), "error: --options: not a JSON object"),
    (("compile", "{two}", "--entry", "matmul", "--options", "tile_cols=12,vector_width=8"),
     "error: options: 'tile_cols' (12) must be a multiple of 'vector_width' (8)"),
])
def test_user_errors_exit_1_without_traceback(capsys, write, tmp_path, argv, prefix):
    paths = {"syntax": write(SYNTAX_ERROR, "syntax.tc"), "semantic": write(SEMANTIC_ERROR, "semantic.tc"),
             "two": write(TWO_DEFS, "two.tc"), "missing": str(tmp_path / "missing.tc")}
    rc, out, err = run_cli(capsys, *(a.format(**paths) for a in argv))
    assert_user_error(rc, out, err, prefix.format(**paths))


def test_bad_files_sizes_and_seeds_are_user_errors(capsys, write, tmp_path):
    """A file that is not UTF-8 text, a size beyond int32 and a negative seed
    are reported by name, never with a traceback."""
    bad = tmp_path / "latin1.tc"
    bad.write_bytes(b"def f(float(N) X) -> (Y) {\n  Y(i) = X(i) # caf\xe9\n}\n")
    for command in ("check", "compile"):
        assert_user_error(*run_cli(capsys, command, str(bad)), f"{bad}:2:20: the file is not UTF-8 text (byte 0xe9)")
    path = write("def f(float(N) X) -> (Y) { Y(i) = X(i) * 2 }\n")
    assert_user_error(*run_cli(capsys, "compile", path, "--specialize", "before-scheduling", "--sizes",
                               "N=2147483648"), "error: --sizes: N=2147483648 does not fit in an index")
    with pytest.raises(SystemExit) as e:
        main(["run", path, "--sizes", "N=3", "--seed", "-1"])
    assert e.value.code == 2
    assert "argument --seed: expected a non-negative integer, got '-1'" in capsys.readouterr().err


def test_options_take_words(capsys, write):
    """``--options fusion=outer`` (a word, not only numbers and booleans) reaches the schedule: the kernel
    differs from the default's, and equals the one of the JSON form."""
    path = write("def f(float(N,M) A) -> (B, C) {\n  B(i, j) = A(i, j) * 2\n  C(i, j) = B(i, j) + A(i, j)\n}\n")
    outs = []
    for opts in (None, "fusion=none", '{"fusion": "none"}'):
        rc, out, err = run_cli(capsys, "compile", path, *(("--options", opts) if opts else ()))
        assert rc == 0, err
        outs.append(out)
    assert outs[1] == outs[2] and outs[1] != outs[0]
    assert outs[1].count("T.parallel") == 2 and outs[0].count("T.parallel") == 1


def test_console_script(write):
    """One real process: the installed entry point exits 1 with a located message."""
    script = Path(sys.executable).with_name("tcdsl")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "tcdsl"]
    path = write(SEMANTIC_ERROR)
    proc = subprocess.run(cmd + ["check", path], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith(f"{path}:2:17: unknown tensor or function 'Z'\n"), proc.stderr
    assert "Traceback" not in proc.stderr and '.py"' not in proc.stderr
    assert proc.stdout == ""


# ------------------------------------------------------- a new user's trial
@pytest.mark.parametrize("sizes, message", [
    ("T=-4,B=2,Ci=3,Co=5", "error: --sizes: T=-4: a size cannot be negative"),
    ("T=3,B=2,Ci=3,Co=5,T=4", "error: --sizes: 'T' is given twice (T=3 and T=4)"),
    ("T=100000,B=100000,Ci=1,Co=1", "error: sizes T=100000, B=100000, Ci=1, Co=1 give 'input' shape "
                                    "(100000, 100000, 1), 10000000000 elements; tensors are indexed with int32"),
])
def test_run_refuses_bad_sizes_before_making_inputs(capsys, write, sizes, message):
    rc, out, err = run_cli(capsys, "run", write(ELMAN, "elman.tc"), "--sizes", sizes)
    assert_user_error(rc, out, err, message)


def test_compile_refuses_negative_sizes(capsys, write):
    rc, out, err = run_cli(capsys, "compile", write(MATMUL), "--sizes", "N=-1")
    assert_user_error(rc, out, err, "error: --sizes: N=-1: a size cannot be negative")


def test_run_refuses_inputs_larger_than_memory(capsys, write, monkeypatch):
    import tcdsl.cli as cli

    monkeypatch.setattr(cli, "_memory_bytes", lambda: 2 * 2**20)  # a 2 MiB machine: 1 MiB for tcdsl run
    path = write(ELMAN, "elman.tc")
    rc, out, err = run_cli(capsys, "run", path, "--sizes", "T=64,B=32,Ci=64,Co=64")  # 512 + 512 KiB + 32 KiB
    assert_user_error(rc, out, err, "error: --sizes T=64,B=32,Ci=64,Co=64: the random inputs and the outputs "
                                    "would take 0.0 GiB; 'tcdsl run' uses at most 50% of this machine's memory")
    rc, out, err = run_cli(capsys, "run", path, "--sizes", "T=8,B=4,Ci=16,Co=16")
    assert (rc, err) == (0, "")


def test_run_makes_inputs_in_their_own_dtype(capsys, write, monkeypatch):
    """float32 inputs are drawn as float32 (never a float64 array of the same
    size first); integers and bools in their own types too."""
    import numpy as np

    made = []
    real_rng = np.random.default_rng

    class Spy:
        def __init__(self, seed):
            self.rng = real_rng(seed)

        def standard_normal(self, size=None, dtype=np.float64):
            made.append(("normal", np.dtype(dtype)))
            return self.rng.standard_normal(size, dtype=dtype)

        def integers(self, low, high, size=None, dtype=np.int64):
            made.append(("integers", np.dtype(dtype)))
            return self.rng.integers(low, high, size, dtype=dtype)

    monkeypatch.setattr(np.random, "default_rng", Spy)
    path = write("def f(float(N) A, double(N) D, half(N) H, int16(N) I, bool(N) B) -> (O) {\n"
                 "  O(i) = A(i) + D(i) + H(i) + I(i) + (B(i) ? 1 : 0)\n}\n")
    rc, out, err = run_cli(capsys, "run", path, "--sizes", "N=5")
    assert (rc, err) == (0, "")
    assert made == [("normal", np.float32), ("normal", np.float64), ("normal", np.float32),
                    ("integers", np.int16), ("integers", np.uint8)]
    assert out.startswith("O: shape (5,) float64 sum ")


def test_check_without_a_def_fails_like_compile(capsys, write):
    path = write("# nothing here\n")
    for command in ("check", "compile"):
        rc, out, err = run_cli(capsys, command, path)
        assert_user_error(rc, out, err, f"{path}:1:1: the source defines no function ('def')\n")


OOB_READ = "def next(float(N) A, float(M) C) -> (B) {\n  B(i) = A(i + 1) + C(i) where i in 0:M\n}\n"


@pytest.mark.parametrize("command", ["check", "compile"])
def test_warnings_are_located_like_errors(capsys, write, command):
    path = write(OOB_READ)
    rc, out, err = run_cli(capsys, command, path)
    assert rc == 0 and out
    assert err == (f"{path}:2:10: warning: 'A' may be read out of bounds: for sizes N=1, M=1 at i=0: A(1), "
                   f"but 'A' has size (N)\n  B(i) = A(i + 1) + C(i) where i in 0:M\n         ^^^^^^^^\n"), err


def test_warnings_in_a_real_process(write):
    """The console script prints the warning once, without Python's own
    ``file:line: TcWarning`` header or the line of code that warned."""
    path = write(OOB_READ)
    proc = subprocess.run([sys.executable, "-m", "tcdsl", "check", path], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout == f"{path}: ok (next), 1 warning\n"
    assert proc.stderr.startswith(f"{path}:2:10: warning: 'A' may be read out of bounds")
    assert "TcWarning" not in proc.stderr and ".py" not in proc.stderr and len(proc.stderr.splitlines()) == 3


def test_version(capsys):
    import tcdsl

    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out == f"tcdsl {tcdsl.__version__}\n"


def test_every_argument_has_help(capsys):
    import argparse

    from tcdsl.cli import _parser

    (sub,) = [a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)]
    seen = set()
    for command, parser in sub.choices.items():
        for action in parser._actions:
            assert action.help, (command, action.dest)
            seen.add((command, action.dest))
    assert {("compile", "file"), ("compile", "entry"), ("compile", "target"), ("run", "seed"), ("run", "file"),
            ("check", "file")} <= seen
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    assert "seed of the random inputs" in capsys.readouterr().out


def test_start_is_quick():
    """``--help`` and ``check`` import neither TVM nor PyTorch (SPEC: the CLI
    starts in under 0.5 s); the time itself depends on the machine's load,
    so the test checks the imports."""
    code = ("import sys; from tcdsl.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            f"main(['check', {str(ELMAN_PATH)!r}])\n"
            "print(sorted(m for m in ('tvm', 'torch', 'tvm_ffi') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.rstrip().endswith("elman.tc: ok (elman_rnn)\n[]"), proc.stdout


def test_progress_line_for_slow_compiles(capsys, write, monkeypatch):
    import tcdsl.cli as cli

    path = write(MATMUL)
    rc, out, err = run_cli(capsys, "compile", path)  # not a terminal: no progress line
    assert (rc, err) == (0, "")
    monkeypatch.setattr(cli, "PROGRESS_AFTER_S", 0.0)
    monkeypatch.setenv("TCDSL_PROGRESS", "1")
    rc, out, err = run_cli(capsys, "compile", path, "--options", "tile_rows=2")
    assert rc == 0 and "T.prim_func" in out
    assert re.fullmatch(rf"tcdsl: compiling {re.escape(path)} for llvm \.\.\.\n"
                        rf"tcdsl: compiling {re.escape(path)} for llvm: done in \d+\.\d s\n", err), err
    monkeypatch.setenv("TCDSL_PROGRESS", "0")
    assert run_cli(capsys, "compile", path)[2] == ""
