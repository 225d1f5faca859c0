"""The A/B gate across code versions (`gpubench compare --ab BASE_REF`): the chosen points
measured from BASE_REF's code and from the working tree's in the same job, alternately, each
version in fresh processes of its own, and each point judged by the 95% interval of its
head/base ratio (science.regression) against a margin.

How it measures (the verdict's confirmation, run.confirm, across two versions): one measuring
process per version (run.version_worker), started in that version's tree with it first on
PYTHONPATH, imports its torch and harness once. Each round, each version forks a fresh
process that builds and warms the points with its own harness (the base's first in even
rounds, the head's in odd ones; one round per device where the points are on several); then
the two time WINDOWS windows of about WINDOW_S of each point, alternating window by window
(which of the two goes first alternates too), and the round's processes end. A version's
figure for a point in a round is the geometric mean of its windows' samples/s. The two
versions' windows ran within a fraction of a second of each other, so their ratio cancels the
machine's drift; the rounds' fresh processes carry the spread between processes into the
interval. Each version's processes say which gpubench they imported, and the base's must be
the base tree's where the head's is the head tree's (a base run on the head's code would pass
any change).

Why many short windows: a shared CPU's pace moves by tens of percent within a second (on the
quiet 2-core CPU of 2026-12-02, mlp/tiny's samples/s over 10 ms windows lay 0.73-1.40 of
their mean, 5th to 95th percentile; two 10 ms windows in a row correlated at 0.89, two 0.1 s
windows at 0.54: scripts/pace.py), so windows of 0.1 s, three a round, left each round's
ratio 4-11% apart (a quiet A/A's intervals reached 0.753-1.14); fifteen of 0.02 s (a step at
the least) left 2-4%. The geometric mean, not the median: the pace jumps between two levels,
and a median of a few windows jumps with it (per-round ratios 2.4-3.3% apart against 3.0-3.6%
by the median, same rounds).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from gpubench.config.spec import Point
from gpubench.probes import process_tree
from gpubench.run.base_tree import Trees
from gpubench.science import regression
from gpubench.store.ab_record import ABPoint, ABRecord

ROUNDS = 12  # the default: a 95% interval of the median ratio between the 3rd and 10th rounds'
WINDOW_S = 0.02  # seconds of steps per window (one step at the least)
WINDOWS = 15  # windows of each point of each version in each round
READY_TIMEOUT_S = 600.0  # a version's measuring process importing torch on a busy machine
ANSWER_TIMEOUT_S = 600.0  # one round's points in one version's process


class ABError(RuntimeError):
    """A version's measuring process failed (its error in one line; `detail`: its traceback
    or the end of its stderr)."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail


class Version:
    """One code version's measuring process (run.version_worker) in `tree`."""

    def __init__(self, name: str, tree: Path, what: str, log: Path) -> None:
        self.name = name  # "base" or "head"
        self.tree = tree
        self.what = what  # "the base (main, 0a358a7)": how errors name it
        self.log = log  # its stderr
        self.gpubench: str | None = None
        self._proc: subprocess.Popen[str] | None = None
        self._fork = True

    def start(self) -> None:
        """Start its process (not waiting for its imports: ready() does)."""
        env = dict(os.environ)
        # its own tree first; the head's tree never on the base's path
        others = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        others = [p for p in others if Path(p).resolve() != self.tree.resolve()]
        env["PYTHONPATH"] = os.pathsep.join([str(self.tree), *others])
        source = Path(__file__).with_name("version_worker.py").read_text(encoding="utf-8")
        with self.log.open("a", encoding="utf-8") as err:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", source],
                cwd=self.tree,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                # a session of its own: the terminal's Ctrl-C is the gate's to handle, and
                # close() ends the process and the fresh one it may have forked together
                start_new_session=True,
            )

    def ready(self) -> str:
        """Wait for its imports; the gpubench/__init__.py it imported."""
        answer = self._answer(READY_TIMEOUT_S)
        self.gpubench = str(answer["gpubench"])
        self._fork = bool(answer.get("fork"))
        return self.gpubench

    def begin(self, points: list[Point]) -> None:
        """Start a round: `points` built and warmed in a fresh process of this version."""
        if self._proc is None:  # no fork here: a new process for each round
            self.start()
            self.ready()
        listed = [p.to_dict() for p in points]
        self._ask({"begin": {"points": listed, "window_s": WINDOW_S, "windows": WINDOWS}})

    def window(self, i: int) -> float:
        """Point `i` of the round's samples/s over one window."""
        return float(self._ask({"window": i})["samples_per_s"])

    def end(self) -> dict[str, Any]:
        """End the round (its process ends): the other load over its windows."""
        answer = self._ask({"end": True})
        if not self._fork:
            self.close()
        return answer

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        proc = self._proc
        assert proc is not None and proc.stdin is not None
        proc.stdin.write(json.dumps(request) + "\n")
        proc.stdin.flush()
        answer = self._answer(ANSWER_TIMEOUT_S)
        if "error" in answer:
            detail = answer.get("traceback") or log_tail(self.log)
            raise ABError(f"{self.what} failed to measure: {answer['error']}", detail)
        return answer

    def _answer(self, timeout_s: float | None) -> dict[str, Any]:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        line = _line(proc.stdout, timeout_s)
        if not line:
            code = proc.poll()
            raise ABError(
                f"{self.what}'s measuring process ended (exit status {code}) or did not answer",
                log_tail(self.log),
            )
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        """End its process group at once (its measuring process and any fresh one forked)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()


def _line(stream: IO[str], timeout_s: float | None) -> str:
    """The next line of `stream`; "" at its end, or where none came within `timeout_s`."""
    if timeout_s is not None and hasattr(os, "fork"):  # select works on pipes here
        import select

        ready, _, _ = select.select([stream], [], [], timeout_s)
        if not ready:
            return ""
    return stream.readline()


def log_tail(path: Path, lines: int = 20) -> str:
    """The last `lines` lines of the file `path` ("" where it cannot be read)."""
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def check_own_code(what: str, base_gpubench: str, head_gpubench: str, trees: Trees) -> None:
    """ABError where the head imported gpubench from its tree and the base (`what`: how errors
    name it) did not from its: the base would measure other code than BASE_REF's."""
    if Path(head_gpubench).resolve().is_relative_to(trees.head.resolve()) and not Path(
        base_gpubench
    ).resolve().is_relative_to(trees.base.resolve()):
        raise ABError(
            f"{what}'s process imported gpubench from {base_gpubench}, not from the base's "
            f"tree {trees.base}: it would measure other code than BASE_REF's"
        )


def versions(trees: Trees) -> dict[str, Any]:
    """ab.json's fields that name the two versions (BASE_REF, both commits, whether the head
    has changes not committed)."""
    return {
        "base_ref": trees.base_ref,
        "base_commit": trees.base_commit,
        "head_commit": trees.head_commit,
        "head_changed": trees.head_changed,
    }


def judged(
    identities: list[dict[str, Any]],
    base: list[list[float]],
    head: list[list[float]],
    margin: float,
) -> list[ABPoint]:
    """Each point's record: `identities[i]` (a Point's dict, or a benchmark's), its figures
    per round (`base[r][i]`, `head[r][i]`, higher is faster) and science.regression's judgement
    of their ratio at `margin`."""
    points = []
    for i, identity in enumerate(identities):
        b = [row[i] for row in base]
        h = [row[i] for row in head]
        j = regression.judge(b, h, margin)
        points.append(ABPoint(identity, b, h, j.ratio, j.low, j.high, j.reading))
    return points


def _round(
    order: tuple[Version, Version], points: list[Point]
) -> tuple[dict[str, list[float]], list[dict[str, Any]]]:
    """One round of `points` (of one device): each version's figure per point (the geometric
    mean of its windows' samples/s, the versions alternating window by window, `order[0]`
    first in the first), and the versions' end-of-round answers."""
    for v in order:
        v.begin(points)
    windows: dict[str, list[list[float]]] = {v.name: [[] for _ in points] for v in order}
    for w in range(WINDOWS):
        for i in range(len(points)):
            for v in order if (w + i) % 2 == 0 else order[::-1]:
                windows[v.name][i].append(v.window(i))
    ends = [v.end() for v in order]
    return {n: [statistics.geometric_mean(x) for x in per] for n, per in windows.items()}, ends


def measure(
    trees: Trees,
    points: list[Point],
    margin: float,
    rounds: int = ROUNDS,
    log_dir: Path | None = None,
    on_round: Callable[[int, int], None] | None = None,
) -> ABRecord:
    """Measure `points` from both trees, `rounds` rounds alternating the version that goes
    first, and judge each point's head/base ratio at `margin` (science.regression). `log_dir`:
    where each version's stderr goes (default: beside the base tree); `on_round(done, of)`
    after each round. ABError where a version's process fails or imports the wrong code."""
    started = time.perf_counter()
    process_tree.claim_root()  # their processes are gpubench's own: no "other load"
    logs = log_dir if log_dir is not None else trees.base.parent
    short = trees.base_commit[:7]
    base = Version("base", trees.base, f"the base ({trees.base_ref}, {short})", logs / "base.log")
    head = Version("head", trees.head, "the head (the working tree)", logs / "head.log")
    # one request per device: a process's interleaved points share one device's checks
    devices = list(dict.fromkeys(p.device for p in points))
    groups = [[i for i, p in enumerate(points) if p.device == d] for d in devices]
    figures: dict[str, list[list[float]]] = {"base": [], "head": []}  # [round][point]
    loads: list[float] = []
    busy: list[bool] = []
    try:
        for v in (base, head):  # both import at once
            v.start()
        for v in (base, head):
            v.ready()
        assert base.gpubench is not None and head.gpubench is not None
        check_own_code(base.what, base.gpubench, head.gpubench, trees)
        for r in range(rounds):
            rows = {"base": [0.0] * len(points), "head": [0.0] * len(points)}
            for group in groups:
                order = (base, head) if r % 2 == 0 else (head, base)
                got, ends = _round(order, [points[i] for i in group])
                for name, row in rows.items():
                    for i, value in zip(group, got[name], strict=True):
                        row[i] = value
                loads += [
                    float(e["other_load_cores"])
                    for e in ends
                    if e.get("other_load_cores") is not None
                ]
                busy += [bool(e["busy"]) for e in ends if e.get("busy") is not None]
            for name, row in rows.items():
                figures[name].append(row)
            if on_round is not None:
                on_round(r + 1, rounds)
    finally:
        base.close()
        head.close()
    assert base.gpubench is not None and head.gpubench is not None
    return ABRecord(
        **versions(trees),
        margin=margin,
        rounds=rounds,
        window_s=WINDOW_S,
        windows=WINDOWS,
        seconds=time.perf_counter() - started,
        base_gpubench=base.gpubench,
        head_gpubench=head.gpubench,
        points=judged([p.to_dict() for p in points], figures["base"], figures["head"], margin),
        other_load_cores=max(loads, default=None),
        busy=any(busy) if busy else None,
    )
