"""Datasheet peaks of known GPUs: dense (no sparsity) tensor or vector throughput in TFLOPS, per
gpubench precision, from NVIDIA's product datasheets. fp32 is the non-tensor-core FP32 rate;
fp16 and bf16 are tensor-core rates with fp32 accumulation (what PyTorch uses), which on GeForce
cards is half the fp16-accumulate rate. A precision a GPU lacks is absent."""

from __future__ import annotations

# (label, the CUDA device names of that product, dense TFLOPS per _PRECISIONS; None: the GPU
# lacks it). A name must match one of these exactly (case and surrounding spaces aside): a loose
# pattern would give "NVIDIA RTX A1000" the A100's peak, or "RTX 4090 D" the 4090's.
_PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
_A100 = ("NVIDIA A100-SXM4-40GB", "NVIDIA A100-SXM4-80GB", "NVIDIA A100-PCIE-40GB")
_TABLE: list[tuple[str, tuple[str, ...], tuple[float | None, ...]]] = [
    ("H200 NVL", ("NVIDIA H200 NVL",), (60.0, 417.5, 835.5, 835.5)),
    ("H200 SXM", ("NVIDIA H200",), (67.0, 494.7, 989.4, 989.4)),
    ("H100 PCIe", ("NVIDIA H100 PCIe",), (51.2, 378.0, 756.0, 756.0)),
    ("H100 SXM", ("NVIDIA H100 80GB HBM3",), (67.0, 494.7, 989.4, 989.4)),
    ("A100", (*_A100, "NVIDIA A100 80GB PCIe"), (19.5, 156.0, 312.0, 312.0)),
    ("L40S", ("NVIDIA L40S",), (91.6, 183.0, 362.05, 362.05)),
    ("L4", ("NVIDIA L4",), (30.3, 60.0, 121.0, 121.0)),
    ("A10", ("NVIDIA A10",), (31.2, 62.5, 125.0, 125.0)),
    ("V100 SXM2", ("Tesla V100-SXM2-16GB", "Tesla V100-SXM2-32GB"), (15.7, None, None, 125.0)),
    ("V100 PCIe", ("Tesla V100-PCIE-16GB", "Tesla V100-PCIE-32GB"), (14.0, None, None, 112.0)),
    ("T4", ("Tesla T4",), (8.1, None, None, 65.0)),
    ("GeForce RTX 4090", ("NVIDIA GeForce RTX 4090",), (82.6, 82.6, 165.2, 165.2)),
    ("GeForce RTX 3090", ("NVIDIA GeForce RTX 3090",), (35.6, 35.6, 71.0, 71.0)),
]


def lookup(device_name: str) -> tuple[str, dict[str, float]] | None:
    """The datasheet entry (label, {precision: TFLOPS}) for a CUDA device name, or None for a
    GPU this table does not know (never a guess from a similar one)."""
    name = " ".join(device_name.split()).casefold()
    for label, names, peaks in _TABLE:
        if name in (n.casefold() for n in names):
            return label, {p: v for p, v in zip(_PRECISIONS, peaks, strict=True) if v is not None}
    return None


def peak_tflops(device_name: str, precision: str) -> float | None:
    entry = lookup(device_name)
    return None if entry is None else entry[1].get(precision)
