"""Do several runs of one suite give one answer, and does each quote one figure per
configuration? For run folders made by the same sweep (the default sweep run back to back, say),
prints each partition's answer in each run and checks, as issue 41 asks:

- no configuration named fastest (not a tie) in one run is beaten by another configuration
  named fastest (not a tie) in another run;
- every figure a verdict quotes (its leader's and its ties') is the run's table figure for that
  configuration (the frame the summary table and the charts draw), and `explain --json`'s;
- no tie is the re-measurement's doing: every tie was re-measured ("not re-measured" or "cut
  short" in how sure it is counts against it).

Usage: python scripts/verdict_agreement.py RUN_DIR [RUN_DIR ...]
Exit status 0 where all three hold, 1 otherwise.
"""

from __future__ import annotations

import sys
from pathlib import Path

from gpubench.report.explain import run_frame, run_verdicts
from gpubench.report.runs import load_runs


def main(dirs: list[Path]) -> int:
    answers: dict[str, list[tuple[str, str]]] = {}  # heading -> (run, "fastest X" or "tie")
    faults: list[str] = []
    for d in dirs:
        runs = load_runs([d])
        frame = run_frame(runs)
        ok = frame[frame["status"] == "ok"]
        for v in run_verdicts(runs, frame):
            quoted = [v.samples_per_s, *(float(t["samples_per_s"]) for t in v.ties)]
            for f in quoted:
                if (ok["samples_per_s"] - f).abs().min() > 1e-6:
                    faults.append(f"{d.name} {v.model}: quotes {f:,.0f}, no row of its table")
            tie = bool(v.ties)
            if tie and not v.remeasured:
                faults.append(f"{d.name} {v.model}: a tie not re-measured ({v.confidence})")
            said = f"tie: {v.fastest} and {len(v.ties)} more" if tie else f"fastest {v.fastest}"
            answers.setdefault(v.model, []).append((d.name, said))
            print(
                f"{d.name}  {v.model}: {said}, {v.samples_per_s:,.0f} samples/s"
                + (" (re-measured)" if v.remeasured else "")
            )
    for heading, said in sorted(answers.items()):
        named = {s.removeprefix("fastest ") for _, s in said if s.startswith("fastest ")}
        if len(named) > 1:
            faults.append(f"{heading}: named fastest differ between runs: {sorted(named)}")
        print(f"{heading}: " + "; ".join(s for _, s in said))
    print("\n".join(["", *faults]) if faults else "\nevery check holds")
    return 1 if faults else 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    sys.exit(main([Path(a) for a in sys.argv[1:]]))
