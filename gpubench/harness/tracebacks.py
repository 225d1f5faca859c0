"""The few lines of a traceback worth showing in a terminal: its last frames, the user's own
preferred over gpubench's, torch's and Python's. It reads text: a worker cannot send the
exception."""

from __future__ import annotations

import itertools
import re
import sysconfig
from dataclasses import dataclass
from pathlib import Path

_FRAME = re.compile(r'^\s*File "(?P<file>.+)", line (?P<line>\d+), in (?P<func>.+)$')
# Python 3.11's position markers under a frame's source line: ~~~~^^^^
_MARKERS = re.compile(r"^[\s~^]+$")
_GPUBENCH = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    function: str
    source: str  # the frame's source line, stripped; "" where the traceback has none

    def lines(self) -> list[str]:
        """The frame as Python prints it: its place, then its source line indented."""
        head = f'  File "{self.file}", line {self.line}, in {self.function}'
        return [head, f"    {self.source}"] if self.source else [head]


def frames(text: str) -> list[Frame]:
    """Every frame of a traceback's text, outermost first; for chained exceptions, the frames
    of each exception in the order printed."""
    found: list[Frame] = []
    lines = [*text.splitlines(), ""]
    for line, nxt in itertools.pairwise(lines):
        if match := _FRAME.match(line):
            indented = nxt.startswith("    ") and not _FRAME.match(nxt) and not _MARKERS.match(nxt)
            source = nxt.strip() if indented else ""
            found.append(Frame(match["file"], int(match["line"]), match["func"], source))
    return found


def is_library(file: str) -> bool:
    """Whether a frame's file is gpubench's, an installed package's (torch included) or the
    standard library's: not the user's own code."""
    if file.startswith("<"):  # <frozen runpy>, <string>: Python's machinery
        return True
    installed = ("stdlib", "platstdlib", "purelib", "platlib")
    roots = [_GPUBENCH, *(Path(sysconfig.get_paths()[k]).resolve() for k in installed)]
    return any(Path(file).resolve().is_relative_to(root) for root in roots)


def last_frames(text: str, count: int = 2) -> list[str]:
    """The last `count` frames of the traceback in `text` that are the user's own (is_library
    says which are not), or its last `count` frames where none is; as printable lines (two a
    frame). [] for a text with no frames."""
    every = frames(text)
    own = [f for f in every if not is_library(f.file)]
    return [line for f in (own or every)[-count:] for line in f.lines()]
