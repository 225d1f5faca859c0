"""Show max-batch and out-of-memory handling on a CUDA GPU (issue 6).

Run from the repository root on a machine with a GPU:

    PYTHONPATH=. python scripts/gpu_oom_check.py [--model transformer --size base]

1. max-batch of the model (fp32, AdamW) with no cap but the GPU's own memory: doubling, then
   binary search, each probe a few training steps in a fresh process, then a confirming run;
2. the same under --max-memory 16G (the caching allocator's per-process fraction), which must
   find a smaller batch;
3. a sweep across the boundary: the batch sizes that fit are measured, the first that does not
   is an `oom` row (CUDA out of memory, in a worker that is then replaced), larger ones are
   `oom` rows marked skipped, and a point after them is measured again.

Writes gpu_oom_check.json and sweep/<timestamp>/ (a run folder) under $OUT (default
results/gpu_oom_check), and prints a short table last.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch

from gpubench.config.spec import Budget, Point, SweepSpec
from gpubench.run import maxbatch
from gpubench.run.memory_cap import parse_size
from gpubench.run.sweep import default_run_dir, run_sweep
from gpubench.store.wording import size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="transformer")
    parser.add_argument("--size", default="base")
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--optimizer", default="adamw")
    parser.add_argument("--cap", default="16G", help="the --max-memory of the capped search")
    parser.add_argument("--device", default="cuda", help="cpu only to try this script out")
    parser.add_argument("--ceiling", type=int, default=maxbatch.CEILING)
    args = parser.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("no CUDA device here; this check needs a GPU", file=sys.stderr)
        return 1
    out = Path(os.environ.get("OUT", "results/gpu_oom_check"))
    out.mkdir(parents=True, exist_ok=True)
    point = Point(args.model, args.size, args.device, args.precision, args.optimizer, 1)
    confirm = Budget.fixed(10, warmup_steps=2)
    gpu = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else None
    report: dict[str, Any] = {"gpu": gpu}
    summary: list[tuple[str, str]] = [("device", gpu or args.device)]

    for label, cap in (("uncapped", None), (f"--max-memory {args.cap}", parse_size(args.cap))):
        t0 = time.perf_counter()
        found = maxbatch.find(
            point, cap, 600, ceiling=args.ceiling, confirm_budget=confirm, on_probe=_show
        )
        seconds = time.perf_counter() - t0
        report[label] = {**found.to_dict(), "seconds": seconds}
        searched = len(found.search_probes)
        summary.append(
            (
                f"max-batch {label}",
                f"largest {found.largest} ({searched} search probes, "
                f"{len(found.probes) - searched} confirming; {seconds:.0f} s)"
                + (f"; stopped: {found.stopped}" if found.stopped else ""),
            )
        )
    largest = report["uncapped"]["largest_batch"]
    if largest < 1:
        print("not even a batch of one fits; nothing to sweep", file=sys.stderr)
        return 1

    # a sweep across the boundary: powers of two up to 4x past it, then one that fits again
    top = 1 << (largest.bit_length() + 1)
    batch_sizes = tuple(b for b in maxbatch.powers_of_two(top) if b >= max(1, top >> 5))
    spec = SweepSpec(
        name="gpu-oom-check",
        models=(args.model,),
        size=args.size,
        devices=(args.device,),
        batch_sizes=batch_sizes,
        precisions=(args.precision,),
        optimizers=tuple(dict.fromkeys((args.optimizer, "sgd"))),
        budget=Budget.fixed(3, warmup_steps=1),
    )
    run_dir = default_run_dir(out / "sweep")
    frame = run_sweep(spec, run_dir, on_row=lambda row, i, n: _show_row(row, i, n))
    rows = frame.to_dict("records")
    report["sweep"] = [
        {k: r[k] for k in ("optimizer", "batch_size", "status", "error", "step_time_s")}
        for r in rows
    ]
    for r in rows:
        peak = r["torch_peak_allocated_bytes"]
        if r["status"] != "ok":
            detail = str(r["error"])[:70]
        elif peak is None or peak != peak:  # NaN: not measured on this device
            detail = f"{r['step_time_s'] * 1e3:.1f} ms/step"
        else:
            detail = f"{r['step_time_s'] * 1e3:.1f} ms/step, peak {size(peak)}"
        summary.append((f"sweep {r['optimizer']} B={r['batch_size']}", f"{r['status']}: {detail}"))
    (out / "gpu_oom_check.json").write_text(json.dumps(report, indent=2, default=str) + "\n")

    width = max(len(k) for k, _ in summary)
    print(f"\n{'check'.ljust(width)}  result")
    for key, value in summary:
        print(f"{key.ljust(width)}  {value}")
    return 0


def _show(p: maxbatch.Probe) -> None:
    print(f"  {p.phase:>7} B={p.batch_size}: {p.status} ({p.seconds:.1f} s)", flush=True)


def _show_row(row: dict[str, Any], i: int, n: int) -> None:
    print(f"  [{i}/{n}] {row['optimizer']} B={row['batch_size']}: {row['status']}", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
