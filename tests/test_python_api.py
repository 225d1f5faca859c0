"""The README's Python API, as written, from a folder that is not the checkout: a shipped suite
is found by its name or by the README's relative path wherever Python runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from doc_pages import block_after

from gpubench.config.errors import ConfigError
from gpubench.config.suite import SHIPPED, load_suite

ROOT = Path(__file__).resolve().parent.parent

# Between loading the suite and running it, the test shrinks it to one tiny point: the snippet's
# every line runs as written, in seconds rather than the quick suite's minutes.
SHRINK = (
    "import dataclasses\n"
    "spec = dataclasses.replace(spec, models=('mlp',), size='tiny', devices=('cpu',), "
    "batch_sizes=(2,), precisions=('fp32',), optimizers=('sgd',), seeds=(0,), "
    "budget=gpubench.Budget.fixed(2, 1), profile=False, grow_batch_sizes=())\n"
)


def readme_snippet() -> str:
    snippet = block_after("README.md", "## Your own model", "python")
    # the reference page shows the same example, so it runs too
    assert snippet in block_after("docs/api.md", "# Python API", "python")
    return snippet


def test_the_readmes_python_api_runs_from_another_folder(tmp_path: Path) -> None:
    lines = readme_snippet().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if "load_suite(" in line)
    code = "".join(lines[: at + 1]) + SHRINK + "".join(lines[at + 1 :])
    code += "assert len(frame) == 1 and frame['status'].tolist() == ['ok'], frame\n"
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize("name", ["quick", "quick.toml", "suites/quick.toml"])
def test_load_suite_takes_a_shipped_suites_name_from_any_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.chdir(tmp_path)
    assert load_suite(name) == load_suite(SHIPPED / "quick.toml")


def test_a_file_of_that_name_here_comes_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "quick.toml").write_text('name = "mine"\nmodels = ["mlp"]\n')
    assert load_suite("quick.toml").name == "mine"
    assert load_suite("quick").name == "quick"  # a bare name is the shipped suite's


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("nosuch", "unknown suite 'nosuch'"),
        ("mine/nosuch.toml", "suite file 'mine/nosuch.toml' does not exist"),
        ("/nowhere/quick.toml", "suite file '/nowhere/quick.toml' does not exist"),
    ],
)
def test_an_unknown_suite_names_the_shipped_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, fragment: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as info:
        load_suite(name)
    assert fragment in str(info.value)
    assert "allowed: a .toml file, or a shipped suite: " in str(info.value)
    assert "quick" in str(info.value).partition("allowed")[2]
