"""tune's hand-written search against Optuna given the same ordered axes, pruning and budget
(tests/optuna_rival.py says how), on the simulated surfaces of tests/test_tune_search.py and
on recorded grids: how often each names a configuration within 3% of the true best, over SEEDS
seeds. Synthetic and seeded: nothing is measured on this machine.

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
