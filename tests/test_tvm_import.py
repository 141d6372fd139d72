"""TVM is imported without PyTorch (tcdsl/_tvm_import.py): ``import tcdsl``
and a compile leave ``torch`` unimported, and PyTorch imported afterwards
works with tcdsl's kernels (tensors in and out, autograd) as when it was
imported first.  Each case runs in a new interpreter, where the import order
is the one written."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")

ADD = "def add(float(N) A, float(N) B) -> (C) { C(i) = A(i) + B(i) }"
SCALE = "def scale(float(N) A, float(N) B) -> (C) { C(i) = A(i) * B(i) }"


def _run(code: str) -> str:
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300,
                       env={"TCDSL_DISK_CACHE": "0", "PATH": "/usr/bin:/bin"})
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout


def test_compile_and_call_do_not_import_torch_then_torch_works():
    out = _run(f"""
        import sys
        import numpy as np
        import tcdsl
        k = tcdsl.compile({ADD!r})
        assert np.array_equal(k(np.arange(4, dtype=np.float32), np.ones(4, np.float32)), [1, 2, 3, 4])
        import tvm, tvm_ffi
        print("torch after compile:", "torch" in sys.modules)
        import torch
        c = k(torch.arange(5, dtype=torch.float32), torch.ones(5))
        assert type(c) is torch.Tensor and c.tolist() == [1, 2, 3, 4, 5], c
        out = torch.zeros(5)
        k(torch.ones(5), torch.ones(5), out=out)
        assert out.tolist() == [2.0] * 5, out
        gru = torch.nn.GRU(3, 4)
        assert gru(torch.ones(2, 1, 3))[0].shape == (2, 1, 4)
        f = tcdsl.torch.op({SCALE!r})
        a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
        b = torch.tensor([4.0, 5.0, 6.0], requires_grad=True)
        f(a, b).sum().backward()
        assert a.grad.tolist() == [4.0, 5.0, 6.0] and b.grad.tolist() == [1.0, 2.0, 3.0], (a.grad, b.grad)
        print("ok")
    """)
    assert out.split("\n")[:2] == ["torch after compile: False", "ok"], out


def test_torch_imported_first_is_tvms_torch():
    out = _run(f"""
        import torch
        import tcdsl
        k = tcdsl.compile({ADD!r})
        import tvm_ffi._convert
        assert tvm_ffi._convert.torch is torch
        assert k(torch.ones(3), torch.ones(3)).tolist() == [2.0, 2.0, 2.0]
        print("ok")
    """)
    assert out.strip() == "ok"


def test_no_trace_left_in_the_import_system():
    """After TVM's import ``torch`` is not shadowed by a None entry and the
    finder passes everything through."""
    out = _run("""
        import sys
        import tcdsl
        import tvm
        assert "torch" not in sys.modules
        import importlib.util
        assert importlib.util.find_spec("torch") is not None
        assert tvm.__spec__.loader.__class__.__name__ != "_WithoutTorchLoader"
        print("ok")
    """)
    assert out.strip() == "ok"
