"""Bad calls raise TcShapeError naming the argument and the dimension."""
from __future__ import annotations

import numpy as np
import pytest

import tcdsl
from helpers import ELMAN, ROOT


@pytest.fixture(scope="module")
def elman():
    return tcdsl.compile(ELMAN)


def ok_inputs(T=3, B=2, Ci=4, Co=5):
    return [np.zeros(s, np.float32) for s in [(T, B, Ci), (B, Co), (Ci, Co), (Co, Co)]]


def test_wrong_number_of_inputs(elman):
    with pytest.raises(tcdsl.TcShapeError, match="takes 4 inputs .* but 3 were given"):
        elman(*ok_inputs()[:3])


def test_wrong_rank(elman):
    x = ok_inputs()
    x[1] = np.zeros((2, 5, 1), np.float32)
    with pytest.raises(tcdsl.TcShapeError, match="argument 'h0': expected 2 dimensions, got 3"):
        elman(*x)


def test_wrong_dtype(elman):
    x = ok_inputs()
    x[2] = x[2].astype(np.float64)
    with pytest.raises(tcdsl.TcShapeError, match="argument 'i2h': dtype float64, but the kernel expects float32"):
        elman(*x)


def test_inconsistent_sizes_name_both_places(elman):
    x = ok_inputs()
    x[1] = np.zeros((2, 7), np.float32)
    with pytest.raises(tcdsl.TcShapeError, match=r"argument 'i2h' dim 1: size 5, but size 'Co' is 7 \(from 'h0' dim 1\)"):
        elman(*x)


def test_sizes_fixed_at_compile_time():
    k = tcdsl.compile(ELMAN, sizes={"Co": 5})
    assert k(*ok_inputs()).shape == (3, 2, 5)
    with pytest.raises(tcdsl.TcShapeError, match="size 'Co' was fixed to 5"):
        k(*ok_inputs(Co=6))


@pytest.mark.parametrize("n", [2**31, 2**32 + 1, 2**40])
def test_sizes_beyond_int32_are_refused(n):
    """Sizes are int32 in the kernels: a larger one, fixed at compile time or
    given at the call (a free loop size), is refused instead of wrapping."""
    with pytest.raises(tcdsl.TcError, match=f"'N' = {n} does not fit in an index"):
        tcdsl.compile("def f(float(N) X) -> (Y) { Y(i) = X(i) * 2 }", sizes={"N": n})
    k = tcdsl.compile("def f(float(N) X) -> (Y) { for t in S { Y(i) += X(i) } }")
    with pytest.raises(tcdsl.TcShapeError, match=f"'S' = {n} does not fit in an index"):
        k(np.ones(3, np.float32), S=n)
    np.testing.assert_array_equal(k(np.ones(3, np.float32), S=3), np.full(3, 3.0))


def test_read_only_inputs_are_read_in_place(tmp_path):
    """Read-only arrays (a read-only memory map, np.frombuffer of bytes,
    setflags(write=False)) are inputs like any other, at the first call and
    once their shapes have a plan; a read-only out= array is refused."""
    import mmap

    k = tcdsl.compile("def f(float(N) X) -> (Y) { Y(i) = X(i) * 2 }")
    x = np.arange(6, dtype=np.float32)
    frozen = x.copy()
    frozen.setflags(write=False)
    (tmp_path / "x.bin").write_bytes(x.tobytes())
    with open(tmp_path / "x.bin", "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        mapped = np.frombuffer(mm, np.float32)
        for a in [frozen, np.frombuffer(x.tobytes(), np.float32), mapped, frozen, mapped]:
            np.testing.assert_array_equal(k(a), 2 * x)
        del mapped, a  # (the map closes only once no array views it)
    out = np.zeros(6, np.float32)
    out.setflags(write=False)
    with pytest.raises(tcdsl.TcShapeError, match="out= array for 'Y' is read-only"):
        k(x, out=out)
    np.testing.assert_array_equal(out, 0)


def test_non_contiguous_inputs_are_accepted(elman):
    x = ok_inputs()
    big = np.random.default_rng(0).standard_normal((5, 10)).astype(np.float32)
    x[3] = big[:, ::2]
    assert not x[3].flags.c_contiguous
    ref = elman(*[np.ascontiguousarray(a) for a in x])
    np.testing.assert_array_equal(elman(*x), ref)


def test_misaligned_input_does_not_crash(elman):
    x = ok_inputs()
    buf = np.zeros(3 * 2 * 4 + 1, np.float32)
    x[0] = buf[1:].reshape(3, 2, 4)  # 4 bytes past an aligned address
    assert x[0].ctypes.data % 64 != 0
    assert elman(*x).shape == (3, 2, 5)


def test_nan_and_inf_pass_through():
    k = tcdsl.compile("def f(float(N) A) -> (B) { B(i) = A(i) * 2 }")
    out = k(np.array([np.nan, np.inf, -np.inf, 1], np.float32))
    assert np.isnan(out[0]) and out[1] == np.inf and out[2] == -np.inf and out[3] == 2


def test_out_of_range_indirect_indices_are_clamped_not_read_out_of_bounds():
    k = tcdsl.compile("def f(float(N) B, int32(M) C) -> (A) { A(i) = B(C(i)) }")
    B = np.arange(4, dtype=np.float32)
    out = k(B, np.array([3, 100_000_000, -100_000_000, 1], np.int32))
    np.testing.assert_array_equal(out, [3, 3, 0, 1])  # no crash; in-range indices read their element


@pytest.mark.parametrize("dtype", ["int64", "uint32", "uint64"])
@pytest.mark.parametrize("mode", ["never", "before-scheduling"])
def test_wide_indirect_indices_are_clamped_by_their_whole_value(dtype, mode):
    """An index held in 64 bits is clamped as a whole: 2**32 + 1 is past the
    end (not 1, its low 32 bits), -2**32 + 2 below 0 (not 2); checked mode
    reports it."""
    src = f"def f(float(N, E) W, {dtype}(M) C) -> (A) {{ A(i, e) = W(C(i), e) }}"
    W = np.arange(12, dtype=np.float32).reshape(4, 3)
    values = [3, 2**32 + 1, 2**31, 2**63 - 1, 1, 0, 2**64 - 1, -2**32 + 2, -1, -2**63]
    values = [v for v in values if np.iinfo(dtype).min <= v <= np.iinfo(dtype).max]
    C = np.array(values, dtype=object).astype(dtype)
    want = W[[min(max(v, 0), 3) for v in values]]
    np.testing.assert_array_equal(tcdsl.compile(src, specialize=mode)(W, C), want)
    checked = tcdsl.compile(src, specialize=mode, options={"checked": True})
    with pytest.raises(tcdsl.TcError, match="'W' is read out of bounds: its index along dimension 0 is not in"):
        checked(W, C[[v >= 4 for v in values].index(True):][:1])


@pytest.mark.parametrize("mode", ["never", "after-scheduling", "before-scheduling"])
def test_index_arithmetic_on_data_wraps_as_values_do(mode):
    """``idx(n) + 1`` at INT32_MAX is INT32_MIN (int32 arithmetic wraps,
    docs/language.md): clamped to the first element, and out of range in
    checked mode -- in every mode, not an overflow LLVM may assume away."""
    src = "def f(float(V, E) W, int32(N) idx) -> (y) { y(n, e) = W(idx(n) + 1, e) }"
    W = np.arange(30, dtype=np.float32).reshape(6, 5)
    idx = np.array([2**31 - 1, 0, 2**31 - 2, 4], np.int32)
    np.testing.assert_array_equal(tcdsl.compile(src, specialize=mode)(W, idx), W[[0, 1, 5, 5]])
    checked = tcdsl.compile(src, specialize=mode, options={"checked": True})
    for bad in [2**31 - 1, 2**31 - 2]:
        with pytest.raises(tcdsl.TcError, match="'W' is read out of bounds"):
            checked(W, np.array([bad, 0], np.int32))


def test_run_rejects_an_unknown_size(capsys):
    from tcdsl.cli import main

    from helpers import ELMAN as path

    assert main(["run", str(path), "--sizes", "T=2,B=1,Ci=2,Co=2,Z=3"]) == 1
    assert "Z is not a size of 'elman_rnn'" in capsys.readouterr().err


# ------------------------------------------------ the fast path (issue 4)
# A call with shapes checked before goes through a plan (runtime/fastcall.py);
# everything it does not take must still meet the general checks.

def planned(k, inputs):
    """Call once so that ``k`` has a plan for these shapes; then forbid the general path."""
    first = k(*inputs)
    k._call = lambda *a: pytest.fail("the general path ran for a planned call")
    return first


def test_errors_are_the_same_once_the_shapes_have_a_plan():
    k = tcdsl.compile(ELMAN, sizes={"Co": 5})
    x = ok_inputs()
    k(*x)
    assert len(k._plans) == 1
    bad_dtype = x[:2] + [x[2].astype(np.float64), x[3]]
    with pytest.raises(tcdsl.TcShapeError, match="argument 'i2h': dtype float64, but the kernel expects float32"):
        k(*bad_dtype)
    with pytest.raises(tcdsl.TcShapeError, match="takes 4 inputs .* but 3 were given"):
        k(*x[:3])
    with pytest.raises(tcdsl.TcShapeError, match=r"argument 'i2h' dim 1: size 6, but size 'Co' is 5"):
        k(*x[:2], np.zeros((4, 6), np.float32), x[3])
    with pytest.raises(tcdsl.TcShapeError, match="size 'Co' was fixed to 5"):
        k(*ok_inputs(Co=6))
    with pytest.raises(tcdsl.TcShapeError, match=r"out= array for 'hidden': shape \(3, 2, 4\), but the inputs give"):
        k(*x, out=np.zeros((3, 2, 4), np.float32))
    with pytest.raises(tcdsl.TcShapeError, match="out= array for 'hidden' must be C-contiguous"):
        k(*x, out=np.zeros((3, 2, 10), np.float32)[:, :, ::2])
    with pytest.raises(tcdsl.TcShapeError, match="argument 'hidden': dtype float64, but the kernel expects float32"):
        k(*x, out=np.zeros((3, 2, 5)))
    big = np.zeros((5, 10), np.float32)
    big[:, ::2] = x[3]
    np.testing.assert_array_equal(k(*x[:3], big[:, ::2]), k(*x))  # non-contiguous: copied, same result


def test_planned_calls_give_fresh_zero_filled_outputs():
    k = tcdsl.compile("def f(float(N) A) -> (B) { B(i) = A(i) where i in 1:N }")  # B(0) is never written
    a = np.arange(1, 5, dtype=np.float32)
    first = planned(k, [a])
    second, third = k(a), k(a)
    assert second is not first and third is not second
    np.testing.assert_array_equal(second, [0, 2, 3, 4])
    second[0] = 7  # the next output must not reuse this array
    np.testing.assert_array_equal(k(a), [0, 2, 3, 4])
    out = np.full(4, 9, np.float32)
    assert k(a, out=out) is out
    np.testing.assert_array_equal(out, [9, 2, 3, 4])  # with out=, unwritten elements keep what they hold
    assert k(a, out=[out]) is out
    assert k.cache_info()["hits"] == 6


def test_planned_calls_with_several_outputs_and_a_scalar_input():
    src = "def f(float(N) A, float s) -> (B, C) { B(i) = A(i) * s\n C(i) = A(i) + s }"
    k = tcdsl.compile(src)
    a, s = np.arange(3, dtype=np.float32), np.float32(2)
    general = k._call
    k(a, np.array(s))
    k._call = lambda *x: pytest.fail("the general path ran for a planned call")
    b, c = k(a, np.array(s))
    np.testing.assert_array_equal(b, a * 2)
    np.testing.assert_array_equal(c, a + 2)
    for s in (2.0, 2, np.float64(2), np.float32(2)):  # scalars for a 0-rank input are converted, as in general
        b, c = k(a, s)
        np.testing.assert_array_equal(c, a + 2)
    k._call = general
    with pytest.raises(tcdsl.TcShapeError, match="argument 's': dtype float64"):
        k(a, np.array(2.0))


def test_planned_calls_with_torch_tensors():
    torch = pytest.importorskip("torch")
    k = tcdsl.compile("def f(float(N, M) A, float(M) B) -> (C) { C(i, j) = A(i, j) * B(j) }")
    a, b = torch.randn(3, 5), torch.randn(5)
    planned(k, [a, b])
    c = k(a, b)
    assert isinstance(c, torch.Tensor) and c.shape == (3, 5)
    torch.testing.assert_close(c, a * b)
    out = torch.full((3, 5), 9.0)
    assert k(a, b, out=out) is out
    torch.testing.assert_close(out, a * b)
    del k._call
    assert isinstance(k(a.numpy(), b.numpy()), np.ndarray)  # NumPy arrays of the same shapes: their own plan


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
@pytest.mark.parametrize("layout", ["sparse_coo", "sparse_csr", "mkldnn"])
def test_non_strided_torch_tensors_are_refused_by_name(layout):
    """A sparse (or other non-strided) tensor is a TcShapeError naming the
    argument, before and after the dense shapes have a plan, and as out=."""
    torch = pytest.importorskip("torch")
    k = tcdsl.compile("def f(float(N, M) A, float(M) B) -> (C) { C(i, j) = A(i, j) * B(j) }")
    a, b = torch.randn(3, 5), torch.randn(5)
    convert = {"sparse_coo": lambda x: x.to_sparse(), "sparse_csr": lambda x: x.to_sparse_csr(),
               "mkldnn": lambda x: x.to_mkldnn()}[layout]
    for _ in range(2):
        with pytest.raises(tcdsl.TcShapeError, match=rf"^argument 'A': a _?{layout} tensor, but the kernel takes "
                                                     r"dense \(strided\) tensors; convert it with \.to_dense\(\)$"):
            k(convert(a), b)
        torch.testing.assert_close(k(a, b), a * b)  # the second round has a plan for these shapes
    with pytest.raises(tcdsl.TcShapeError, match=rf"^argument 'C': a _?{layout} tensor"):
        k(a, b, out=convert(torch.zeros(3, 5)))


def test_mixed_numpy_and_torch_inputs_give_torch_outputs():
    """docs/api.md, step 3: one PyTorch input makes every output a PyTorch
    tensor, in any position; all-NumPy calls give NumPy outputs; the values
    are the same either way (also once the shapes have a plan)."""
    torch = pytest.importorskip("torch")
    k = tcdsl.compile("def f(float(N) A, float(N) B, float s) -> (C, D) { C(i) = A(i) + B(i) * s\n D(i) = A(i) }")
    a = np.arange(4, dtype=np.float32)
    t = torch.arange(4, dtype=torch.float32) * 2
    for _ in range(2):
        for x, y, kind in [(a, a, np.ndarray), (a, t, torch.Tensor), (t, a, torch.Tensor), (t, t, torch.Tensor)]:
            c, d = k(x, y, 3.0)
            assert type(c) is kind and type(d) is kind
            want = np.asarray(x) + np.asarray(y) * 3
            np.testing.assert_array_equal(np.asarray(c), want)
            np.testing.assert_array_equal(np.asarray(d), np.asarray(x))


def test_zero_size_calls_are_never_planned():
    k = tcdsl.compile("def f(float(N) A) -> (B) { B(i) = A(i) + 1 }")
    assert k(np.zeros(0, np.float32)).shape == (0,)
    assert k(np.zeros(0, np.float32)).shape == (0,)
    assert k._plans == {}


@pytest.mark.slow
def test_output_shape_functions_agree_with_evaluate():
    """The compiled shape formulas (one Python function per kernel) against the interpreter of size expressions."""
    from tcdsl import driver
    from tcdsl.codegen.signature import evaluate, shape_function
    from tcdsl.source import Source
    from tcdsl.syntax.parse import parse

    rng = np.random.default_rng(0)
    programs = sorted((ROOT / "tests" / "programs").glob("*.tc"))
    tried = 0
    for path in programs:
        src = Source.load(path)
        for d in parse(src).defs:
            try:
                fe = driver.frontend(src, d.name)
            except tcdsl.TcError:
                continue
            shapes = [fe.ranges.extent_exprs(t) for t in fe.checked.tensors]
            fn = shape_function(shapes)
            for _ in range(3):
                sizes = {s: int(rng.integers(1, 9)) for s in fe.checked.sizes}
                try:
                    want = tuple(tuple(evaluate(e, sizes) for e in shape) for shape in shapes)
                except ZeroDivisionError:
                    continue
                assert fn(sizes) == want, (path.name, d.name, sizes)
                tried += 1
    assert tried > 100


def test_kernel_without_inputs_called_repeatedly():
    """A def with no inputs: every call takes the general path (the fast call
    dispatches on the first input's type) and gives fresh outputs."""
    k = tcdsl.compile("def f() -> (b) { b(i) = 4 where i in 0:10 }")
    first = k()
    np.testing.assert_array_equal(first, np.full(10, 4, np.int32))
    first[:] = 0
    np.testing.assert_array_equal(k(), np.full(10, 4, np.int32))
    out = np.zeros(10, np.int32)  # the literal 4 makes b an int32 tensor
    assert k(out=out) is out and (out == 4).all()
