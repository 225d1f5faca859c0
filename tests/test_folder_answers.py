"""What a results folder answers is right (issue 50): a merge keeps each source's confirmation of
a partition whose rows all come from that source and says a partition of several sources is not
confirmed, with how to confirm it; one folder named twice counts once; an interrupted
confirmation is said, with the command that finishes it (and that command does)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gpubench.cli.main import main
from gpubench.run.phases import PhaseLog
from gpubench.store import phases_record

TINY = [
    "quick", "--models", "mlp", "--size", "tiny", "--devices", "cpu", "--precisions", "fp32",
    "--steps", "1", "--quiet",
]  # fmt: skip


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A: two partitions (sgd, adamw) at batches 4 and 8, confirmed; B: sgd at batch 16."""
    root = tmp_path_factory.mktemp("runs")
    a, b = root / "a", root / "b"
    opts = ["--optimizers", "sgd,adamw", "--batch-sizes", "4,8"]
    assert main(["sweep", *TINY, *opts, "--out", str(a)]) == 0
    opts = ["--optimizers", "sgd", "--batch-sizes", "16", "--no-confirm"]
    assert main(["sweep", *TINY, *opts, "--out", str(b)]) == 0
    return a, b


def _partition(confirm: dict, optimizer: str) -> dict:
    (found,) = [p for p in confirm["partitions"] if p["fixed"]["optimizer"] == optimizer]
    return found


def test_merge_keeps_a_sources_confirmation_and_says_which_are_not(
    runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = runs
    out = tmp_path / "merged"
    capsys.readouterr()
    assert main(["merge", str(a), str(b), "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert f"confirmations kept: mlp tiny adamw (from {a})" in said, said
    assert "not confirmed (rows from several run folders): mlp tiny sgd" in said
    assert "to confirm, measure the points in one sweep" in said  # two suites: no resume
    merged = json.loads((out / "confirm.json").read_text())
    source = json.loads((a / "confirm.json").read_text())
    assert _partition(merged, "adamw") == _partition(source, "adamw")
    sgd = _partition(merged, "sgd")
    assert sgd["status"] == "skipped" and "several merged run folders" in sgd["reason"]
    record = json.loads((out / "merge.json").read_text())
    assert record["confirmations_kept"] == [f"mlp tiny adamw (from {a})"]
    assert record["not_confirmed"] == ["mlp tiny sgd"]
    capsys.readouterr()
    assert main(["explain", str(out), "--json"]) == 0
    verdicts = {v["optimizer"]: v for v in json.loads(capsys.readouterr().out)["verdicts"]}
    assert verdicts["adamw"]["confirmation"] == _partition(source, "adamw")
    assert "never re-measured side by side" in json.dumps(verdicts["sgd"])


def test_one_folder_named_twice_counts_once(
    runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, _ = runs
    link = tmp_path / "link"
    link.symlink_to(a)
    capsys.readouterr()
    assert main(["explain", str(a), "--json"]) == 0
    once = capsys.readouterr().out
    assert main(["explain", str(a), f"{a}/", str(link), "--json"]) == 0
    twice = capsys.readouterr()
    assert twice.out == once
    notes = twice.err.strip().splitlines()
    assert len(notes) == 2 and all("counted once" in n for n in notes), twice.err


def test_the_confirmation_phase_is_in_phases_json_from_its_start(tmp_path: Path) -> None:
    log = PhaseLog()
    log.attach(tmp_path)
    with log.phase("confirmation", announce=True):
        record = phases_record.read(tmp_path)
        assert record is not None and [p.phase for p in record.phases] == ["confirmation"]


def test_an_interrupted_confirmation_is_said_with_the_command_that_finishes_it(
    finished_sweep: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the session's finished sweep (one partition: its resume confirms one, not A's two)
    run = Path(shutil.copytree(finished_sweep, tmp_path / "run"))
    (run / "confirm.json").unlink()  # stopped within its confirmation: phases.json has it begun
    rows = (run / "results.jsonl").read_text()
    capsys.readouterr()
    assert main(["explain", str(run)]) == 0
    said = capsys.readouterr().out
    finish = f"python -m gpubench sweep --resume {run}"
    assert "the confirmation was interrupted; finish it with:" in said and finish in said, said
    assert "no confirmation in this run" not in said
    assert main(["sweep", "--resume", str(run), "--quiet"]) == 0
    assert (run / "confirm.json").is_file()
    assert (run / "results.jsonl").read_text() == rows  # no point measured again
    capsys.readouterr()
    assert main(["explain", str(run)]) == 0
    assert "interrupted" not in capsys.readouterr().out
