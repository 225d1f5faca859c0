"""Compare accumulated convergence runs with unaccumulated ones of the same effective batch
(issue 25): for each accumulated point, the largest gap between its held-out loss and that of the
same seed's unaccumulated run, at every evaluation both made, beside the spread between the
unaccumulated seeds there (largest minus smallest).

    python scripts/accumulation_curves.py RUN_DIR

Prints one line per accumulated point and exits 1 where a gap exceeds the seeds' spread at its
evaluation (the claim the note makes), 0 otherwise.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from typing import Any

from gpubench.store.results import read_rows

KEY = ("model", "model_size", "device", "precision", "optimizer", "batch_size", "lr_scaling")


def curve(row: dict[str, Any]) -> dict[int, float]:
    """Held-out loss by step."""
    return {int(c["step"]): float(c["eval_loss"]) for c in row["curve"] if c["eval_loss"]}


def main(run_dir: str) -> int:
    rows = [r for r in read_rows(run_dir) if r.get("curve") and r["status"] == "ok"]
    plain: dict[tuple[Any, ...], dict[int, dict[int, float]]] = defaultdict(dict)
    for r in rows:
        if r.get("accumulate", 1) == 1:
            plain[tuple(r[k] for k in KEY)][int(r["seed"])] = curve(r)
    worst = 0.0
    for r in rows:
        k = r.get("accumulate", 1)
        seeds = plain.get(tuple(r[key] for key in KEY), {})
        if k == 1 or int(r["seed"]) not in seeds or len(seeds) < 2:
            continue
        mine, same = curve(r), seeds[int(r["seed"])]
        steps = [s for s in mine if s in same and all(s in c for c in seeds.values())]
        gaps = {s: abs(mine[s] - same[s]) for s in steps}
        spread = {s: max(c[s] for c in seeds.values()) - min(c[s] for c in seeds.values())
                  for s in steps}  # fmt: skip
        at = max(steps[1:], key=lambda s: gaps[s] / spread[s] if spread[s] else 0.0)
        worst = max(worst, gaps[at] / spread[at] if spread[at] else 0.0)
        print(
            f"{r['model']} B={r['batch_size']} accumulate {k} seed {r['seed']}: largest gap "
            f"{max(gaps.values()):.2e} nats; at step {at} the gap is {gaps[at]:.2e} against a "
            f"seeds' spread of {spread[at]:.3f} ({len(seeds)} seeds, {len(steps)} evaluations)"
        )
    return 1 if worst > 1 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
