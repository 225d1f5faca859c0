"""Datasheet peaks of known GPUs: dense (no sparsity) tensor or vector throughput in TFLOPS, per
gpubench precision, from NVIDIA's product datasheets. fp32 is the non-tensor-core FP32 rate;
fp16 and bf16 are tensor-core rates with fp32 accumulation (what PyTorch uses), which on GeForce
cards is half the fp16-accumulate rate. A precision a GPU lacks is absent."""

from __future__ import annotations

import re

# (pattern on the CUDA device name, label, {precision: dense TFLOPS}). First match wins.
_TABLE: list[tuple[str, str, dict[str, float]]] = [
    (r"H200 NVL", "H200 NVL", {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5}),
    (r"H200", "H200 SXM", {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4}),
    (r"H100.*PCIe", "H100 PCIe", {"fp32": 51.2, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0}),
    (r"H100.*(SXM|HBM3)", "H100 SXM", {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4}),
    (r"A100", "A100", {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0}),
    (r"L40S", "L40S", {"fp32": 91.6, "tf32": 183.0, "bf16": 362.05, "fp16": 362.05}),
    (r"\bL4\b", "L4", {"fp32": 30.3, "tf32": 60.0, "bf16": 121.0, "fp16": 121.0}),
    (r"\bA10\b", "A10", {"fp32": 31.2, "tf32": 62.5, "bf16": 125.0, "fp16": 125.0}),
    (r"V100-SXM2", "V100 SXM2", {"fp32": 15.7, "fp16": 125.0}),
    (r"V100-PCIE", "V100 PCIe", {"fp32": 14.0, "fp16": 112.0}),
    (r"\bT4\b", "T4", {"fp32": 8.1, "fp16": 65.0}),
    (r"RTX 4090", "GeForce RTX 4090", {"fp32": 82.6, "tf32": 82.6, "bf16": 165.2, "fp16": 165.2}),
    (r"RTX 3090", "GeForce RTX 3090", {"fp32": 35.6, "tf32": 35.6, "bf16": 71.0, "fp16": 71.0}),
]


def lookup(device_name: str) -> tuple[str, dict[str, float]] | None:
    """The datasheet entry (label, {precision: TFLOPS}) for a CUDA device name, or None for a
    GPU this table does not know (never a guess from a similar one)."""
    for pattern, label, peaks in _TABLE:
        if re.search(pattern, device_name, flags=re.IGNORECASE):
            return label, dict(peaks)
    return None


def peak_tflops(device_name: str, precision: str) -> float | None:
    entry = lookup(device_name)
    return None if entry is None else entry[1].get(precision)
