"""One code version's measuring process for `compare --ab` (run.ab starts one per version).

run.ab runs this file's text as `python -c` with the version's tree as the current folder and
first on PYTHONPATH, so `gpubench` here is that version's package: the base's process imports
none of the head's code (the command's own fork server, run.forkserver, preloads the head's
tree, so it is not used). It imports only the standard library until it imports the version's
torch and harness once, with what the version's fork server preloads (torch._dynamo: seconds
each fresh process would pay). Then, for each round, it forks a fresh process that builds and
warms the round's points with the version's own harness (harness.interleave's candidates, as
the verdict's re-measurement builds them) and times one window of one point at each request,
so that run.ab can alternate the two versions window by window; the round's process ends
after it. Where there is no fork (Windows) it serves the round itself, and run.ab starts a new
one for each round.

Requests and answers are JSON lines: stdin, and what was stdout when it started (anything the
measuring prints goes to stderr):
- first, unasked: {"ready": true, "gpubench": its gpubench/__init__.py, "fork": bool}
- {"begin": {"points": [Point.to_dict()], "window_s": s, "windows": n}} -> {"built": true,
  "setup_s": s} (building and warming in the round's fresh process: each point until steady,
  or for harness.interleave's share of its n windows after its first step)
- {"window": i} -> {"samples_per_s": point i's over one window of about window_s}
- {"end": true} -> {"ended": true, "other_load_cores", "busy"} (over the round's windows)
- any failure -> {"error": one line, "traceback": text}; the round's process is then gone
"""

import json
import os
import sys
import time
import traceback
from typing import Any, TextIO

_TOLD = 3  # a round's process's exit status after it answered its error itself
SWITCH_S = 0.05  # steps shorter than this get an untimed step at the start of each window


def main() -> None:
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # whatever the measuring prints goes to stderr, never among the answers
    import importlib

    import gpubench
    import gpubench.harness.interleave  # torch, once, before any fork

    try:  # what the version's own fork server imports before its workers
        from gpubench.run.forkserver import PRELOAD
    except ImportError:  # a version without one
        PRELOAD = ()
    for name in PRELOAD:
        importlib.import_module(name)
    fork = hasattr(os, "fork")
    _send(answers, {"ready": True, "gpubench": os.path.abspath(gpubench.__file__), "fork": fork})
    # one line at a time (never read ahead): a round's process reads the same stdin
    for line in iter(sys.stdin.readline, ""):
        begin = json.loads(line).get("begin")
        if begin is None:
            _send(answers, {"error": f"expected a round's begin, got {line.strip()!r}"})
            continue
        if not fork:
            _round(begin, answers)
            continue
        pid = os.fork()
        if pid == 0:  # the round's fresh process
            os._exit(_round(begin, answers))
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        if code not in (0, _TOLD):
            _send(answers, {"error": f"the round's process died (exit status {code})"})


def _send(out: TextIO, answer: dict[str, Any]) -> None:
    out.write(json.dumps(answer) + "\n")
    out.flush()


def _failed(out: TextIO, e: Exception) -> int:
    _send(out, {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()})
    return _TOLD


def _round(begin: dict[str, Any], out: TextIO) -> int:
    """Serve one round: build and warm its points, time a window of one at each request until
    the round ends. Returns the exit status of the round's process."""
    import torch

    from gpubench.config.spec import Point
    from gpubench.harness import interleave
    from gpubench.probes import load

    started = time.perf_counter()
    try:
        points = [Point.of(d) for d in begin["points"]]
        window_s = float(begin["window_s"])
        built = [interleave._Candidate(p) for p in points]
        for c in built:
            c.build(interleave.WARMUP_SHARE * window_s * int(begin["windows"]))
        steps = [max(1, round(window_s / c.estimate)) for c in built]
    except Exception as e:  # told to run.ab, which stops the gate with it
        return _failed(out, e)
    _send(out, {"built": True, "setup_s": time.perf_counter() - started})
    with load.OtherLoad() as others:
        while True:
            line = sys.stdin.readline()
            if not line:  # run.ab is gone
                return 0
            request = json.loads(line)
            if "end" in request:
                break
            try:
                i = int(request["window"])
                c = built[i]
                assert c.prepared is not None
                seconds = _window(c, steps[i])
                _send(out, {"samples_per_s": c.point.batch_size * steps[i] / seconds})
                # the next window's steps from this one's pace, as harness.interleave does
                steps[i] = max(1, round(window_s * steps[i] / seconds))
            except Exception as e:
                return _failed(out, e)
    threads = [p.threads or torch.get_num_threads() for p in points]
    needed = max(load.needed_cores(p.device, t) for p, t in zip(points, threads, strict=True))
    busy = load.contended(others.cores, needed, load.cores())
    _send(out, {"ended": True, "other_load_cores": others.cores, "busy": busy})
    return 0


def _window(c: Any, n: int) -> float:
    """Seconds `n` steps of candidate `c` take under its point's settings. A step shorter than
    SWITCH_S runs once untimed first: the first step after the other version's window re-warms
    caches, a cost that would weigh on a short window; a longer step is timed from the first
    (re-warming is a sliver of it, and an untimed step would double a one-step window's cost).
    Written here, not as an argument of harness.interleave._window: this file runs against the
    base's harness too, and an older base's _window takes no such argument."""
    import torch

    from gpubench.harness import interleave
    from gpubench.harness.timing import time_window

    with interleave._settings(c.point):
        if c.estimate < SWITCH_S:
            c.prepared.step()
        return time_window(c.prepared.step, torch.device(c.point.device), n).wall_s


if __name__ == "__main__":
    main()
