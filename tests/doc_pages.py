"""The documentation's pages (README.md and docs/*.md) and what their code blocks show, read
by the tests that keep each documented command runnable as written."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_FENCE = re.compile(r"^```([\w-]*)\n(.*?)^```", re.DOTALL | re.MULTILINE)
_ENV = re.compile(r"[A-Z_][A-Z0-9_]*=.*")
# the page and heading of the documented benchmark gate (test_ci_gate runs it as written)
GATE_PAGE, GATE_HEADING = (
    "docs/ci-gate.md",
    "## A stored baseline, on a dedicated runner: pytest-benchmark",
)


@dataclass(frozen=True)
class Block:
    """One fenced code block: its page (relative to the repository), language and text."""

    page: str
    lang: str
    text: str


def pages() -> list[Path]:
    """README.md, then every docs/*.md page, in a stable order."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks() -> list[Block]:
    """Every fenced code block of every page."""
    found = []
    for page in pages():
        text = page.read_text(encoding="utf-8")
        for lang, body in _FENCE.findall(text):
            found.append(Block(str(page.relative_to(ROOT)), lang, body))
    return found


def block_after(page: str, heading: str, lang: str) -> str:
    """The first `lang` code block after the line `heading` of `page` (relative path)."""
    text = (ROOT / page).read_text(encoding="utf-8")
    at = text.index(heading + "\n")
    m = _FENCE.search(text, at)
    while m is not None and m.group(1) != lang:
        m = _FENCE.search(text, m.end())
    assert m is not None, f"{page}: no {lang} block after {heading!r}"
    return m.group(2)


def shell_lines(block: Block) -> list[str]:
    """The command lines of a block, continuation lines joined. A bash block is all commands;
    in any other block (a synopsis, a command's output) only a line that starts with `$ ` is."""
    lines = block.text.replace("\\\n", " ").splitlines()
    if block.lang == "bash":
        return [line for line in lines if line.strip() and not line.lstrip().startswith("#")]
    return [line[2:] for line in lines if line.startswith("$ ")]


def split(line: str) -> tuple[dict[str, str], list[str]]:
    """A shell line as (leading environment assignments, argv), comments dropped."""
    words = shlex.split(line, comments=True)
    env: dict[str, str] = {}
    while words and _ENV.fullmatch(words[0]):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    return env, words


def gpubench_args(argv: list[str]) -> list[str] | None:
    """gpubench's own arguments in a command line (`python -m gpubench ...`, `gpubench ...`,
    or after torchrun's `-m gpubench [--]`), or None where the line runs something else."""
    if argv[:3] == ["python", "-m", "gpubench"]:
        return argv[3:]
    if argv[:1] == ["gpubench"]:
        return argv[1:]
    if argv[:1] == ["torchrun"] and "gpubench" in argv:
        rest = argv[argv.index("gpubench") + 1 :]
        return rest[1:] if rest[:1] == ["--"] else rest
    return None


def commands() -> list[tuple[str, str, list[str]]]:
    """(page, line, gpubench's arguments) of every gpubench command the pages show runnable."""
    found = []
    for block in blocks():
        for line in shell_lines(block):
            args = gpubench_args(split(line)[1])
            if args is not None:
                found.append((block.page, line, args))
    return found


def torchrun_lines() -> list[list[str]]:
    """The argv of every distinct torchrun command in the pages' code blocks."""
    found: list[list[str]] = []
    for block in blocks():
        for line in block.text.replace("\\\n", " ").splitlines():
            if line.startswith("torchrun ") and shlex.split(line, comments=True) not in found:
                found.append(shlex.split(line, comments=True))
    return found
