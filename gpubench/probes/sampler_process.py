"""NVML sampling from a process of its own, so that it cannot slow the step it measures: on a thread
of the measuring process it cost a launch-bound H100 step 5-8% (a reading holds the GIL for about
4 ms). NVML reads a device, and a process's memory by PID, from any process. The reading function
is named by an import path, so the CPU tests run a fake one in the same process.

`python -m gpubench.probes.sampler_process CONFIG_JSON` prints "ready" after its first reading,
samples until a line (or end of file) arrives on stdin, then prints every reading as one JSON list.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import subprocess
import sys
from typing import Any

from gpubench.probes.nvml_readings import Reading, Summary, summarise
from gpubench.probes.probe import Probe
from gpubench.probes.sampler import DEFAULT_INTERVAL_S, Sampler

START_TIMEOUT_S = 60.0


class ProcessSampler(Probe):
    """Starts the sampling process and waits for its first reading; on exit stops it and sets
    `readings` and `summary` (as sampler.Sampler does). `reader` is "module:function", and
    function(*args) returns the reading function. A failure of the process is raised, with
    its last error line."""

    def __init__(
        self, reader: str, args: tuple[Any, ...] = (), interval_s: float = DEFAULT_INTERVAL_S
    ) -> None:
        self.config = {"reader": reader, "args": list(args), "interval_s": interval_s}
        self.readings: list[Reading] = []
        self.summary: Summary | None = None
        self.pid: int | None = None  # the sampling process's
        self._proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        # The child finds what this process can import (a user's or a test's reader too).
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        proc = subprocess.Popen(
            [sys.executable, "-m", __name__, json.dumps(self.config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self._proc, self.pid = proc, proc.pid
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            _, err = proc.communicate(timeout=START_TIMEOUT_S)
            self._proc = None
            raise RuntimeError(f"the NVML sampling process failed to start: {_last_line(err)}")

    def stop(self, failed: bool = False) -> None:
        proc, self._proc = self._proc, None
        assert proc is not None
        out, err = proc.communicate("stop\n", timeout=START_TIMEOUT_S)
        if failed:  # the block's own error goes on; the readings are not wanted
            return
        if proc.returncode != 0:
            raise RuntimeError(f"NVML sampling failed: {_last_line(err)}")
        self.readings = [Reading(**r) for r in json.loads(out.splitlines()[-1])]
        self.summary = summarise(self.readings)


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no error message"


def main(config_json: str) -> None:
    config = json.loads(config_json)
    module, function = config["reader"].split(":")
    read = getattr(importlib.import_module(module), function)(*config["args"])
    sampler = Sampler(read, config["interval_s"])
    with sampler:
        print("ready", flush=True)
        sys.stdin.readline()  # a line from the parent, or end of file when it is gone
    print(json.dumps([dataclasses.asdict(r) for r in sampler.readings]), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
