"""One code version's measuring process for `compare --ab` (run.ab starts one per version).

run.ab runs this file's text as `python -c` with the version's tree as the current folder and
first on PYTHONPATH, so `gpubench` here is that version's package: the base's process imports
none of the head's code (the command's own fork server, run.forkserver, preloads the head's
tree, so it is not used). It imports only the standard library until it imports the version's
torch and harness once, with what the version's fork server preloads (torch._dynamo: seconds
each fresh process would pay); then, for each request (a JSON line on stdin), it forks a fresh
process that times the request's points interleaved with the version's own
harness.interleave and answers one JSON line. The answers go out on what was stdout when it
started; anything the measuring prints goes to stderr. Where there is no fork (Windows) it
measures in itself, and run.ab starts a new one for each request.

Request: {"points": [Point.to_dict()], "budget_s", "window_s", "min_rounds", "max_rounds"}.
Answers: first {"ready": true, "gpubench": its gpubench/__init__.py, "fork": bool}; then per
request {"samples_per_s": [[per window] per point], "setup_s", "seconds", "other_load_cores",
"busy"} or {"error": one line, "traceback": text}.
"""

import json
import os
import sys
import traceback
from typing import Any, TextIO


def main() -> None:
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # whatever the measuring prints goes to stderr, never among the answers
    import importlib

    import gpubench
    import gpubench.harness.interleave  # torch, once, before any fork

    try:  # what the version's own fork server imports before its workers (torch._dynamo: s)
        from gpubench.run.forkserver import PRELOAD
    except ImportError:  # a version without one
        PRELOAD = ()
    for name in PRELOAD:
        importlib.import_module(name)
    fork = hasattr(os, "fork")
    _send(answers, {"ready": True, "gpubench": os.path.abspath(gpubench.__file__), "fork": fork})
    for line in sys.stdin:
        if line.strip():
            request = json.loads(line)
            _send(answers, _in_fresh_process(request) if fork else _measured(request))


def _send(out: TextIO, answer: dict[str, Any]) -> None:
    out.write(json.dumps(answer) + "\n")
    out.flush()


def _measured(request: dict[str, Any]) -> dict[str, Any]:
    """The request's points timed interleaved in this process, or the error that stopped it."""
    try:
        from gpubench.config.spec import Point
        from gpubench.harness.interleave import interleave

        points = [Point.of(d) for d in request["points"]]
        rounds = interleave(
            points,
            request["budget_s"],
            request["window_s"],
            request["min_rounds"],
            request["max_rounds"],
        )
        return {
            "samples_per_s": rounds.samples_per_s,
            "setup_s": rounds.setup_s,
            "seconds": rounds.seconds,
            "other_load_cores": rounds.other_load_cores,
            "busy": rounds.busy,
        }
    except Exception as e:  # answered to run.ab, which stops the gate with it
        return {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}


def _in_fresh_process(request: dict[str, Any]) -> dict[str, Any]:
    """_measured in a process forked for this request alone, ended after it."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the fresh process
        os.close(read_end)
        with os.fdopen(write_end, "w") as out:
            out.write(json.dumps(_measured(request)))
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as got:
        text = got.read()
    _, status = os.waitpid(pid, 0)
    if not text:
        return {"error": f"the measuring process died (wait status {status})", "traceback": ""}
    answer: dict[str, Any] = json.loads(text)
    return answer


if __name__ == "__main__":
    main()
