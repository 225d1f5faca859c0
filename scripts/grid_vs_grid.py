"""How well a grid reproduces itself, by the rule tune is judged by: each run's pick judged by
each other run's own figures (acceptance.judge_runs, beside it), one line per ordered pair.
Given grids of one space measured at different times, it is the noise floor of "within 3% of
the grid's best".

Usage: python scripts/grid_vs_grid.py RUN_DIR RUN_DIR [RUN_DIR ...]
"""

from __future__ import annotations

import sys
from itertools import permutations
from pathlib import Path

from acceptance import judge_runs

if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    within = pairs = 0
    for pick, judge in permutations([Path(a) for a in sys.argv[1:]], 2):
        for j in judge_runs(judge, pick):
            pairs += 1
            within += j.within
            ratio = "not run there" if j.ratio is None else f"x{j.ratio:.3f}"
            said = "within" if j.within else "NOT within"
            print(
                f"{j.heading}: the pick of {pick} ({j.pick}) by {judge}'s {j.source}: {ratio} "
                f"of its best ({j.grid_best}), {said} {j.margin:.0%}; {j.agreement}"
            )
    print(f"{within} of {pairs} picks within the margin of the other run's best")
