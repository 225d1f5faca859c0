"""Do several runs of one suite give one answer, and does each quote one figure per
configuration? For run folders made by the same sweep (the default sweep run back to back, say),
prints each partition's answer in each run and checks, as issue 41 asks:

- no configuration named fastest (not a tie) in one run is beaten by another configuration
  named fastest (not a tie) in another run; a fastest whose batch is still open (its verdict
  says larger batches were not measured) against a larger batch of the same series named in
  another run is listed apart, as provisional, not as a contradiction;
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
    # heading -> each configuration named fastest (not a tie): its identity, its batch open
    named: dict[str, dict[str, tuple[dict[str, object], bool]]] = {}
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
            batch_open = any(
                "larger batches not measured" in x
                or "not bracketed" in x
                or "time budget ended it" in x
                for x in v.levers
            )
            answers.setdefault(v.model, []).append((d.name, said))
            if not tie:
                named.setdefault(v.model, {})[v.fastest] = (v.identity, batch_open)
            print(
                f"{d.name}  {v.model}: {said}, {v.samples_per_s:,.0f} samples/s"
                + (" (re-measured)" if v.remeasured else "")
            )
    provisional: list[str] = []
    for heading, said in sorted(answers.items()):
        print(f"{heading}: " + "; ".join(s for _, s in said))
        names = named.get(heading, {})
        for a, (ida, a_open) in names.items():
            for b, (idb, _) in names.items():
                if a == b:
                    continue
                same_series = {k: v for k, v in ida.items() if k != "batch_size"} == {
                    k: v for k, v in idb.items() if k != "batch_size"
                }
                if a_open and same_series and int(idb["batch_size"]) > int(ida["batch_size"]):
                    provisional.append(f"{heading}: {a} (its batch open) and {b} in another run")
                elif a < b and not (names[b][1] and same_series):
                    faults.append(f"{heading}: named fastest differ between runs: {a} and {b}")
    if provisional:
        print("\nprovisional (a fastest whose larger batches were not measured):")
        print("\n".join(provisional))
    print("\n".join(["", *faults]) if faults else "\nevery check holds")
    return 1 if faults else 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    sys.exit(main([Path(a) for a in sys.argv[1:]]))
