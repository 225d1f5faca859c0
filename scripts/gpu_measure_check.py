"""Check gpubench's measurements on a CUDA machine (issue 3) and print a short table.

    PYTHONPATH=. python scripts/gpu_measure_check.py

Shows: CUDA-event step times against the synchronised wall clock (%), counted FLOPs against
the analytic count, NVML process memory minus torch's reserved memory across batch sizes (a
near-constant CUDA context overhead), energy per step against average power x step time, and
the measured bf16/fp16/tf32/fp32 matmul peaks against the datasheet. Writes every row and the
summary to $OUT/gpu_measure_check.json when OUT is set.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import torch

from gpubench.config.spec import Budget, Point
from gpubench.harness.point import measure_point
from gpubench.probes import calibration, datasheet, nvml
from gpubench.store import env

BUDGET = Budget(warmup_steps=5, warmup_min_s=0.5, min_time_s=1.5, max_time_s=4.0)


def _point(model: str, batch: int, prec: str = "bf16") -> dict[str, Any]:
    torch.cuda.empty_cache()
    row = measure_point(Point(model, "base", "cuda", prec, "adamw", batch), BUDGET)
    if row["status"] != "ok":
        print(f"  {model} B={batch}: {row['status']} {row['error']}", file=sys.stderr)
    return row


def _f3(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _pct(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None or b == 0 else f"{100 * (a - b) / b:+.2f}%"


def _mib(x: float | None) -> str:
    return "-" if x is None else f"{x / 2**20:.0f}"


def main() -> int:
    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 1
    name = torch.cuda.get_device_name()
    print(f"device: {name}; NVML: {nvml.unavailable_reason() or 'available'}")
    rows: list[dict[str, Any]] = []

    print("\n1. timing and FLOPs (bf16, adamw, base size)")
    print(f"{'model':12} {'B':>5} {'step ms':>9} {'events-wall':>12} {'flops vs analytic':>18}")
    print(
        f"{'':12} {'':>5} {'':>9} {'':>12} {'(method)':>18}  {'tflops':>7} {'mfu':>6} {'roof':>6}"
    )
    for model, batch in (("mlp", 1024), ("cnn", 256), ("transformer", 16)):
        r = _point(model, batch)
        rows.append(r)
        if r["status"] != "ok":
            continue
        print(
            f"{model:12} {batch:>5} {r['step_time_s'] * 1e3:>9.3f} "
            f"{_pct(r['step_time_sum_s'], r['wall_time_s']):>12} "
            f"{_pct(r['flops_per_step'], r['flops_analytic_per_step']):>18}  "
            f"{r['tflops']:>7.1f} {_f3(r['mfu']):>6} {_f3(r['matmul_roof_fraction']):>6}  "
            f"({r['flops_method']})"
        )

    print("\n2. memory (transformer base, bf16): NVML process - torch reserved, MiB")
    print(
        f"{'B':>5} {'alloc':>8} {'reserved':>9} {'nvml proc':>10} {'proc-resv':>10} {'device':>8}"
    )
    for batch in (4, 8, 16, 32):
        r = _point("transformer", batch)
        rows.append(r)
        if r["status"] != "ok":
            continue
        proc, resv = r["nvml_process_peak_used_bytes"], r["torch_peak_reserved_bytes"]
        print(
            f"{batch:>5} {_mib(r['torch_peak_allocated_bytes']):>8} {_mib(resv):>9} "
            f"{_mib(proc):>10} {_mib(None if proc is None else proc - resv):>10} "
            f"{_mib(r['nvml_peak_used_bytes']):>8}"
        )

    print("\n3. energy: energy/step vs avg power x mean step time")
    print(f"{'model':12} {'B':>5} {'J/step':>9} {'W x s':>9} {'diff':>8} {'method':>15} {'W':>6}")
    for r in rows:
        if r["status"] != "ok" or r["energy_j_per_step"] is None or r["avg_power_w"] is None:
            continue
        pxt = r["avg_power_w"] * r["wall_time_s"] / r["steps_measured"]
        print(
            f"{r['model']:12} {r['batch_size']:>5} {r['energy_j_per_step']:>9.4f} {pxt:>9.4f} "
            f"{_pct(r['energy_j_per_step'], pxt):>8} {r['energy_method']:>15} "
            f"{r['avg_power_w']:>6.0f}  throttle={r['throttle_reasons']}"
        )

    print("\n4. matmul peaks (TFLOPS): measured now vs datasheet")
    peaks: dict[str, Any] = {}
    for prec in ("fp32", "tf32", "fp16", "bf16"):
        peak = calibration.matmul_peak("cuda", prec, refresh=True)
        sheet = datasheet.peak_tflops(name, prec)
        measured = None if peak is None else peak.tflops
        peaks[prec] = {"measured_tflops": measured, "n": peak and peak.n, "datasheet": sheet}
        ratio = "-" if measured is None or sheet is None else f"{measured / sheet:.2f}"
        shown = "-" if measured is None else f"{measured:.1f}"
        print(f"{prec:6} measured {shown:>8}  datasheet {sheet or '-':>8}  ratio {ratio}")

    out = os.environ.get("OUT")
    if out:
        path = Path(out) / "gpu_measure_check.json"
        path.write_text(
            json.dumps({"env": env.capture(["cuda"]), "peaks": peaks, "rows": rows}, indent=1)
        )
        print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
