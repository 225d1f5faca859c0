"""Do two runs give the same answer? Compares `gpubench explain DIR --json` of two run folders
(or two saved JSON files) partition by partition (model, size, options, optimizer, lr rule):

- `same winner`: both name a winner, the same configuration;
- `tie, consistent`: at least one is a tie, and the other's winner (or some member of its tie)
  is in it;
- `DIFFERENT`: neither.

Usage: python scripts/answer_agreement.py A B   (A, B: run folders or explain --json files)
Exit status 0 when every partition agrees, 1 otherwise.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

IDENTITY_SKIP = ("seed",)


def answer(source: str) -> dict[str, Any]:
    path = Path(source)
    if path.is_dir():
        out = subprocess.run(
            [sys.executable, "-m", "gpubench", "explain", str(path), "--json"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        return json.loads(out)
    return json.loads(path.read_text(encoding="utf-8"))


def _id(identity: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in identity.items() if k not in IDENTITY_SKIP}, sort_keys=True)


def members(verdict: dict[str, Any]) -> tuple[set[str], set[str]]:
    """The winner (as a one-element set, or empty in a tie) and every configuration named."""
    lead = _id(verdict["leader"]["identity"])
    named = {lead} | {_id(t["identity"]) for t in verdict["ties"]}
    return ({lead} if verdict["winner"] else set()), named


def main(a: str, b: str) -> int:
    first, second = answer(a), answer(b)
    by_heading = {v["heading"]: v for v in second["verdicts"]}
    ok = True
    for v in first["verdicts"]:
        w = by_heading.get(v["heading"])
        if w is None:
            print(f"{v['heading']}: only in the first")
            ok = False
            continue
        (wa, na), (wb, nb) = members(v), members(w)
        if wa and wa == wb:
            verdict = "same winner"
        elif (not wa or not wb) and na & nb:
            verdict = "tie, consistent"
        else:
            verdict = "DIFFERENT"
            ok = False
        say = [x["leader"]["label"] + (" (tie)" if x["ties"] else "") for x in (v, w)]
        print(f"{v['heading']}: {verdict}: {say[0]} | {say[1]}")
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
