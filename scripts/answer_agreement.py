"""Do two runs give the same answer? Per partition, acceptance.agreement (beside it): the same
winner; a tie where each run's leader is inside the other's answer; "the grid could not tell"
where either answer is a tie of more than 3; else different.

Usage: python scripts/answer_agreement.py DIR_A DIR_B
Exit status 0 when every partition agrees, 1 otherwise.
"""

from __future__ import annotations

import sys
from pathlib import Path

from acceptance import AGREEING, compare_runs

if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    found = compare_runs(Path(sys.argv[1]), Path(sys.argv[2]))
    print("\n".join(line for _, line in found))
    sys.exit(0 if all(said in AGREEING for said, _ in found) else 1)
