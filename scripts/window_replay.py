"""Replays a sweep's recorded step times under other stopping rules for the measuring windows,
without timing anything: what each rule would have spent on windows, and how many rows would
end noisy (95% interval of the median wider than the suite's target). The windows are sized as
harness.timing sizes them; where a rule asks for more steps than a row recorded, its recorded
times repeat.

Rules: `--max-time S,...` (the suite's max_time_s per point) and `--futility SLACK,...` (also
stop once the steps the interval predicts for the target, n x (ci / target)^2, exceed SLACK
times the steps the time budget still allows).

Usage: python scripts/window_replay.py RUN_DIR [--max-time 1.0,0.8,0.6] [--futility 1.5,3]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from pathlib import Path

from gpubench.config.spec import Budget
from gpubench.harness import timing
from gpubench.harness.step_stats import Stats
from gpubench.store.results import read_rows


def replay(times: list[float], budget: Budget, slack: float | None) -> tuple[float, float]:
    """Seconds of windows and the final interval (relative) for one row's step times."""
    estimate, used, wall, done = times[0], 0, 0.0, []
    while True:
        n = timing._window_size(len(done), wall, estimate, budget)
        window = (times * (1 + (used + n) // len(times)))[used : used + n]
        used += n
        done += window
        wall += sum(window)
        stats = Stats.of(done)
        estimate = stats.median_s
        if timing._done(stats, wall, budget):
            return wall, stats.ci_rel
        if slack is not None and wall >= budget.min_time_s and math.isfinite(stats.ci_rel):
            allowed = len(done) + (budget.max_time_s - wall) / estimate
            if len(done) * (stats.ci_rel / budget.target_rel_ci) ** 2 > slack * allowed:
                return wall, stats.ci_rel


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--max-time", default="", help="max_time_s values, comma-separated")
    parser.add_argument("--futility", default="", help="slack values, comma-separated")
    args = parser.parse_args()
    suite = json.loads((args.run_dir / "suite.json").read_text(encoding="utf-8"))
    base = Budget(**{k: v for k, v in suite["budget"].items() if k != "deadline"})
    rows = [r for r in read_rows(args.run_dir) if r.get("step_times_s")]
    rules = [("as run", base, None)]
    for t in filter(None, args.max_time.split(",")):
        rules.append((f"max_time_s {t}", dataclasses.replace(base, max_time_s=float(t)), None))
    rules += [(f"futility {s}", base, float(s)) for s in filter(None, args.futility.split(","))]
    print(f"{len(rows)} rows; recorded windows {sum(r['wall_time_s'] for r in rows):.2f} s")
    for name, budget, slack in rules:
        ran = [replay(list(r["step_times_s"]), budget, slack) for r in rows]
        noisy = sum(ci > budget.target_rel_ci for _, ci in ran)
        worst = max(ci for _, ci in ran)
        print(
            f"{name:>16}: windows {sum(w for w, _ in ran):6.2f} s, noisy rows {noisy} of "
            f"{len(rows)}, widest interval {worst:.1%}"
        )


if __name__ == "__main__":
    main()
