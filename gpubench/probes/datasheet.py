"""Datasheet peaks of known GPUs: dense (no sparsity) tensor or vector throughput in TFLOPS, per
gpubench precision, from NVIDIA's product datasheets. fp32 is the non-tensor-core FP32 rate;
fp16 and bf16 are tensor-core rates with fp32 accumulation (what PyTorch uses), which on GeForce
cards is half the fp16-accumulate rate. A precision a GPU lacks is absent."""

from __future__ import annotations

# (label, the CUDA device names of that product, {precision: dense TFLOPS}). A name must match
# one of these exactly (case and surrounding spaces aside): a loose pattern would give
# "NVIDIA RTX A1000" the A100's peak, or "RTX 4090 D" the 4090's. Unknown means null.
_TABLE: list[tuple[str, tuple[str, ...], dict[str, float]]] = [
    (
        "H200 NVL",
        ("NVIDIA H200 NVL",),
        {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5},
    ),
    ("H200 SXM", ("NVIDIA H200",), {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4}),
    (
        "H100 PCIe",
        ("NVIDIA H100 PCIe",),
        {"fp32": 51.2, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0},
    ),
    (
        "H100 SXM",
        ("NVIDIA H100 80GB HBM3",),
        {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4},
    ),
    (
        "A100",
        (
            "NVIDIA A100-SXM4-40GB",
            "NVIDIA A100-SXM4-80GB",
            "NVIDIA A100-PCIE-40GB",
            "NVIDIA A100 80GB PCIe",
        ),
        {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0},
    ),
    ("L40S", ("NVIDIA L40S",), {"fp32": 91.6, "tf32": 183.0, "bf16": 362.05, "fp16": 362.05}),
    ("L4", ("NVIDIA L4",), {"fp32": 30.3, "tf32": 60.0, "bf16": 121.0, "fp16": 121.0}),
    ("A10", ("NVIDIA A10",), {"fp32": 31.2, "tf32": 62.5, "bf16": 125.0, "fp16": 125.0}),
    ("V100 SXM2", ("Tesla V100-SXM2-16GB", "Tesla V100-SXM2-32GB"), {"fp32": 15.7, "fp16": 125.0}),
    ("V100 PCIe", ("Tesla V100-PCIE-16GB", "Tesla V100-PCIE-32GB"), {"fp32": 14.0, "fp16": 112.0}),
    ("T4", ("Tesla T4",), {"fp32": 8.1, "fp16": 65.0}),
    (
        "GeForce RTX 4090",
        ("NVIDIA GeForce RTX 4090",),
        {"fp32": 82.6, "tf32": 82.6, "bf16": 165.2, "fp16": 165.2},
    ),
    (
        "GeForce RTX 3090",
        ("NVIDIA GeForce RTX 3090",),
        {"fp32": 35.6, "tf32": 35.6, "bf16": 71.0, "fp16": 71.0},
    ),
]


def lookup(device_name: str) -> tuple[str, dict[str, float]] | None:
    """The datasheet entry (label, {precision: TFLOPS}) for a CUDA device name, or None for a
    GPU this table does not know (never a guess from a similar one)."""
    name = " ".join(device_name.split()).casefold()
    for label, names, peaks in _TABLE:
        if name in (n.casefold() for n in names):
            return label, dict(peaks)
    return None


def peak_tflops(device_name: str, precision: str) -> float | None:
    entry = lookup(device_name)
    return None if entry is None else entry[1].get(precision)
