"""Numeric precision of a training step: autocast dtype, loss scaling and the TF32 switches."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Precision:
    """How a precision name trains: `autocast` dtype (None: plain fp32), whether fp16 loss
    scaling is needed, and whether TF32 tensor-core math is allowed for fp32 matmuls/convs."""

    name: str
    autocast: torch.dtype | None
    scaler: bool
    tf32: bool


_PRECISIONS = {
    "fp32": Precision("fp32", None, scaler=False, tf32=False),
    "tf32": Precision("tf32", None, scaler=False, tf32=True),
    "fp16": Precision("fp16", torch.float16, scaler=True, tf32=False),
    "bf16": Precision("bf16", torch.bfloat16, scaler=False, tf32=False),
}


def get(name: str) -> Precision:
    return _PRECISIONS[name]


def unsupported_reason(name: str, device: torch.device) -> str | None:
    """Why `name` cannot run on `device`, or None when it can."""
    if device.type == "cpu":
        if name == "tf32":
            return "tf32 is a CUDA tensor-core mode; the CPU has none"
        return None
    if device.type == "cuda":
        major, _ = torch.cuda.get_device_capability(device)
        if name == "tf32" and major < 8:
            return f"tf32 needs compute capability 8.0 or newer; this GPU has {major}.x"
        if name == "bf16" and not torch.cuda.is_bf16_supported(including_emulation=False):
            return "bf16 is not supported natively by this GPU"
        return None
    return f"device type {device.type!r} is not supported"


def cpu_has_bf16() -> bool:
    """Whether this CPU has bf16 arithmetic (AVX-512 BF16 or AMX tiles), the instructions
    oneDNN's bf16 kernels use; without them PyTorch runs bf16 through fp32 conversions."""
    return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())


def emulated_reason(name: str, device_type: str) -> str | None:
    """Why `name` runs emulated on a device of `device_type` here (it runs, converted to and
    from fp32 around each operation, with no hardware to speed it), or None where it does not:
    bf16 on a CPU without bf16 instructions. On a GPU an emulated bf16 is unsupported instead
    (unsupported_reason)."""
    if device_type == "cpu" and name == "bf16" and not cpu_has_bf16():
        return "this CPU has no bf16 instructions (AVX-512 BF16 or AMX), so PyTorch emulates bf16"
    return None


@contextlib.contextmanager
def tf32_mode(enabled: bool) -> Iterator[None]:
    """Set cuBLAS and cuDNN TF32 for the block and restore them after.

    fp32 turns cuDNN TF32 off too (PyTorch's default leaves it on), so 'fp32' means IEEE fp32.
    """
    old_matmul = torch.get_float32_matmul_precision()
    old_cudnn = torch.backends.cudnn.allow_tf32
    torch.set_float32_matmul_precision("high" if enabled else "highest")
    torch.backends.cudnn.allow_tf32 = enabled
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(old_matmul)
        torch.backends.cudnn.allow_tf32 = old_cudnn
