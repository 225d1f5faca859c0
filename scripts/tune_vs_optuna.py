"""tune's hand-written search against Optuna given the same ordered axes, pruning and budget
(tests/optuna_rival.py says how), on the simulated surfaces of tests/test_tune_search.py and
on recorded grids: how often each names a configuration within 3% of the true best, over SEEDS
seeds; then the hand-written search alone replayed on the published grids
(results/20261124-cpu-tune-vs-grid-v3, each row's own noise) at 25% of the grid's cost: how often
its pick is within 3% of the grid's best by the grid's figures. Synthetic and seeded: nothing is
measured on this machine.

    PYTHONPATH=$PWD python scripts/tune_vs_optuna.py [SEEDS]   (default 50)
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import optuna_rival as R

if __name__ == "__main__":
    seeds = range(int(sys.argv[1]) if len(sys.argv) > 1 else 50)
    for problem in [*R.synthetic(), *(R.recorded(name) for name in R.GRIDS)]:
        print(R.compare(problem, seeds).line(), flush=True)
    for name in R.V3:
        runs = [R.replay(name, seed) for seed in seeds]
        within = sum(r is not None and r >= 1 - R.MARGIN for r, _ in runs)
        worst = min(r or 0.0 for r, _ in runs)
        spent = max(s for _, s in runs)
        print(
            f"replay v3 {name} at 25% of the grid: pick within 3% by the grid's figures "
            f"{within}/{len(runs)} (worst x{worst:.3f}, at most {spent:.1f} of 18 measurements)"
        )
