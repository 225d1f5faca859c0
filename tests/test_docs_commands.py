"""Every command that README.md and docs/*.md show runnable parses, as written, with gpubench's
own argument parser, and what it names exists: a sweep's suite loads and validates with its
flags, max-batch's and tune's requests build, every repository path a command or a link names
is there. The commands are read from the pages (every line of a ```bash block, and every `$ `
line of another block), so the pages and this test cannot drift apart. Nothing is measured
here (the torchrun, CI-gate and Python API examples run for real in test_torchrun_readme,
test_ci_gate and test_python_api); CUDA is simulated where a command asks for it, since the
pages show GPU commands that this machine parses but cannot run.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import torch
from doc_pages import (
    GATE_HEADING,
    GATE_PAGE,
    ROOT,
    block_after,
    blocks,
    commands,
    pages,
    shell_lines,
    split,
)

from gpubench.cli import max_batch_args, parser, sweep_args
from gpubench.cli.tune_args import request_from_args
from gpubench.store.row import COLUMNS, SERIES

# repository paths a command may name (a run folder the docs publish, a suite, a script)
_REPO_PATH = re.compile(r"^(?:\.\./)?((?:suites|scripts|tests|docs)/\S+|results/2\d{7}-[\w-]+)")
_LINK = re.compile(r"\]\(([^)\s]+)\)")
# the commands a newcomer needs, each shown runnable in the README itself
README_COMMANDS = {"sweep", "explain", "report", "compare", "max-batch", "tune"}


@pytest.fixture
def cuda_present(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pages' GPU commands (`--devices cuda`) parse as on a machine with GPUs."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)


DOCUMENTED = commands()


def test_the_pages_show_the_commands_a_user_runs() -> None:
    shown = {args[0] for page, _, args in DOCUMENTED if page == "README.md"}
    assert shown >= README_COMMANDS, f"README shows no runnable {README_COMMANDS - shown}"
    readme = [line for page, line, _ in DOCUMENTED if page == "README.md"]
    assert any("--target-batch" in line for line in readme)
    assert any("tune" in line and "--target " in line for line in readme)
    assert len(DOCUMENTED) >= 25, len(DOCUMENTED)


@pytest.mark.parametrize(
    ("page", "line", "args"), DOCUMENTED, ids=[f"{p}: {line[:60]}" for p, line, _ in DOCUMENTED]
)
def test_a_documented_command_parses_and_names_what_exists(
    page: str, line: str, args: list[str], cuda_present: None
) -> None:
    try:
        ns = parser.build_parser().parse_args(args)
    except SystemExit as e:  # argparse's usage error (its message is on stderr above)
        pytest.fail(f"{page}: `{line}` does not parse (exit {e.code})")
    if ns.command == "sweep" and ns.resume is None:
        sweep_args.spec_from_args(ns)  # the suite exists and the flags validate against it
    elif ns.command == "max-batch":
        max_batch_args.point_from_args(ns)
    elif ns.command == "tune" and ns.target is None and ns.resume is None:
        request_from_args(ns)
    for word in args:
        _assert_exists(word.split("=", 1)[-1], f"{page}: `{line}`")


def test_every_path_a_documented_line_names_exists() -> None:
    for block in blocks():
        for line in shell_lines(block):
            for word in split(line)[1]:
                _assert_exists(word.split("=", 1)[-1], f"{block.page}: `{line}`")


def test_every_link_of_the_pages_leads_somewhere() -> None:
    for page in pages():
        text = page.read_text(encoding="utf-8")
        for target in _LINK.findall(text):
            if re.match(r"[a-z]+://", target):
                continue
            path, _, anchor = target.partition("#")
            where = (page.parent / path).resolve() if path else page
            assert where.exists(), f"{page.name}: link {target} leads nowhere"
            if anchor and where.suffix == ".md":
                slugs = {_slug(h) for h in re.findall(r"^#+ (.+)$", where.read_text(), re.M)}
                assert anchor in slugs, f"{page.name}: no heading #{anchor} in {where.name}"


def test_the_readmes_ci_gate_is_the_one_test_ci_gate_runs() -> None:
    """The README's pytest-benchmark lines are docs/ci-gate.md's, which test_ci_gate runs."""
    gate = block_after(GATE_PAGE, GATE_HEADING, "bash").replace("\\\n", " ")
    gate_lines = {" ".join(line.split()) for line in gate.splitlines()}
    readme = [b for b in blocks() if b.page == "README.md" and "tests/benchmarks" in b.text]
    shown = [" ".join(line.split()) for b in readme for line in shell_lines(b)]
    assert shown and set(shown) <= gate_lines, shown


def test_every_result_column_is_documented() -> None:
    text = (ROOT / "docs" / "columns.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`([a-z_0-9]+)`", text))
    missing = [c for c in [*COLUMNS, *SERIES] if c not in named]
    assert not missing, f"docs/columns.md does not name {missing}"


def test_the_readmes_verdict_is_what_explain_prints() -> None:
    """The README's `$ python -m gpubench explain ...` block, run on the committed folder: every
    line it shows is in the output (a line cut with `...` by the part before it)."""
    (block,) = [b for b in blocks() if b.page == "README.md" and "$ python -m gpubench" in b.text]
    command, *shown = block.text.splitlines()
    argv = split(command[2:])[1]
    done = subprocess.run(
        [sys.executable, *argv[1:]], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    for line in shown:
        if line.strip() != "...":
            assert line.split("...")[0] in done.stdout, line


def _assert_exists(word: str, where: str) -> None:
    m = _REPO_PATH.match(word)
    if m is not None:
        assert (ROOT / m.group(1)).exists(), f"{where} names {m.group(1)}, which is not there"


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")
