"""The report's search section (gpubench.report.search_speed) from what `tune` writes: a real
tune.json (tests/data/tune/cnn-stopped, a search stopped by its budget), one built with the
trajectory's own dataclasses, and a real tune_target.json. It states the file's coverage and how
the search ended, draws each trial at its own elapsed second, names the answer as the verdict
does, and is absent where a run has no search file."""

from __future__ import annotations

import json
import re
import shutil
from html import unescape
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pytest

from gpubench.report import search_speed
from gpubench.report.build import build_report
from gpubench.report.explain import explain_runs
from gpubench.store import confirmations, tune_record
from gpubench.store.tune_record import RoundRecord, TrialRecord, TuneRecord
from gpubench.store.wording import percent
from gpubench.tune.record import coverage
from tests.report_fixture import cpu_gpu_runs

PNG = b"\x89PNG\r\n\x1a\n"
DATA = Path(__file__).parent / "data" / "tune"


def _search_text(page: str) -> str:
    """The Search section's words (tags removed, entities decoded)."""
    part = page.split("<h2>Search</h2>")[1].split("<h2>")[0]
    return unescape(re.sub(r"<[^>]+>", " ", part))


def _real_run(tmp_path: Path) -> Path:
    run = tmp_path / "tune-cnn"
    shutil.copytree(DATA / "cnn-stopped", run)
    return run


def test_a_real_tune_json_states_its_true_coverage_and_how_it_ended(tmp_path: Path) -> None:
    run = _real_run(tmp_path)
    record = json.loads((run / "tune.json").read_text())
    page = build_report([run], tmp_path / "out").read_text()
    text = " ".join(_search_text(page).split())
    c = record["coverage"]
    share = c["configurations_measured"] / c["space_size"]
    assert (
        f"{c['configurations_measured']} of {c['space_size']} configurations measured "
        f"({percent(share)}); {c['combos_measured']} of {c['combos']} setting combinations"
    ) in text
    assert f"Stopped early: {record['stopped']}; {record['rounds_decided']} of 3 rounds" in text
    assert "?" not in text.split("Time:")[0]  # nothing the file holds reads as unknown
    assert "named no answer" not in text
    assert (tmp_path / "out" / "plots" / "search.png").read_bytes()[:8] == PNG
    # Every trial is in the table, each open one said to be in a round never decided.
    table = page.split("Trials: what was measured")[1].split("</table>")[0]
    assert table.count("<tr>") == 1 + len(record["trials"])
    n_open = sum(t["outcome"] == "open" for t in record["trials"])
    assert n_open > 0 and table.count("was never decided") == n_open


def test_the_answer_is_the_verdicts_own(tmp_path: Path) -> None:
    run = _real_run(tmp_path)
    page = build_report([run], tmp_path / "out").read_text()
    (verdict,), _ = explain_runs([run])
    text = " ".join(_search_text(page).split())
    assert f"Answer, as the verdict above names it: {verdict.headline()}." in text
    assert verdict.headline() in unescape(page.split("<h2>Verdict</h2>")[1])


def test_each_trial_is_drawn_at_its_own_elapsed_second(tmp_path: Path) -> None:
    record = json.loads((DATA / "cnn-stopped" / "tune.json").read_text())
    fig = search_speed.figure(tune_record.read(DATA / "cnn-stopped"), "run")
    xs = [x for line in fig.axes[0].lines if line.get_gid() == "trial" for x in line.get_xdata()]
    plt.close(fig)
    elapsed = [t["elapsed_s"] for t in record["trials"]]
    assert sorted(xs) == sorted(elapsed)
    assert len(set(xs)) == len(xs) == len(record["trials"])


def _trial(number: int, rnd: int, batch: int, sps: float | None, end: float, outcome: str):
    return TrialRecord(
        number=number,
        round=rnd,
        config={"precision": "bf16", "compile": "eager", "batch_size": batch},
        budget_s=0.5 * (rnd + 1),
        status="ok" if sps is not None else "oom",
        samples_per_s=sps,
        compile_time_s=None,
        point_time_s=1.5,
        elapsed_s=end,
        outcome=outcome,
        best_so_far_samples_per_s=None,
        best_so_far_config=None,
    )


def built_record() -> dict[str, Any]:
    """A finished search written with gpubench.tune.trajectory's dataclasses: round 0 measured
    4 batches (2 pruned when it was decided at 16 s, one failed), round 1 the 2 it kept."""
    trials = [
        _trial(0, 0, 32, 900.0, 10.0, "pruned"),
        _trial(1, 0, 128, 2400.0, 12.0, "kept"),
        _trial(2, 0, 512, 2100.0, 14.0, "kept"),
        _trial(3, 0, 2048, None, 16.0, "failed"),
        _trial(4, 1, 128, 2350.0, 19.0, "final"),
        _trial(5, 1, 512, 2200.0, 22.0, "final"),
    ]
    rounds = [
        RoundRecord(
            0, 0.5, measured=4, kept=2, pruned=1, failed=1, final=0, open=0, ended_at_s=16.0
        ),
        RoundRecord(
            1, 1.0, measured=2, kept=0, pruned=0, failed=0, final=2, open=0, ended_at_s=22.0
        ),
    ]
    record = TuneRecord(
        request={"model": "mlp", "size": "small", "device": "cpu", "budget_s": 40.0},
        space={"axes": {}, "batch_sizes": [32, 128, 512, 2048], "size": 8},
        elapsed_s=30.0,
        finished=True,
        rounds_decided=2,
        coverage=coverage(4, 8, 1, 2),
        rounds=tuple(rounds),
        trials=tuple(trials),
    )
    return dict(json.loads(json.dumps(record.to_dict())))  # as the file holds it


def test_what_was_pruned_when_and_where_the_time_went(tmp_path: Path) -> None:
    cpu, gpu = cpu_gpu_runs(tmp_path)
    (cpu / "tune.json").write_text(json.dumps(built_record()))
    page = build_report([cpu, gpu], tmp_path / "out").read_text()
    text = " ".join(_search_text(page).split())
    assert "Finished: the search ran all its rounds (2 of 2 rounds decided)" in text
    assert "4 of 8 configurations measured (50%); 1 of 2 setting combinations" in text
    # 30 s in all: 8.5 s before the first trial (it ended at 10 s after 1.5 s), 6 trials of
    # 1.5 s, 4.5 s between them (22 - 8.5 - 9), 8 s after the last.
    assert "Time: 30 s in all against a budget of 40 s (10 s to spare)" in text
    assert "8.5 s of set-up before the first trial" in text and "6 trials took 9 s" in text
    assert "4.5 s between them" in text and "8 s after the last trial" in text
    # Two runs: the verdict spans both, so the answer comes from the file (none recorded).
    assert "The search named no answer: no confirmation is recorded." in text
    assert "pruned when round 0 was decided at 16 s" in text
    assert "failed (oom): no figure" in text and text.count("measured in the last round") == 2


def test_a_tune_json_unlike_what_tune_writes_is_named_in_one_line(tmp_path: Path) -> None:
    cpu, _ = cpu_gpu_runs(tmp_path)
    record = built_record()
    record["trials"][2]["elapsed_s"] = "late"
    (cpu / "tune.json").write_text(json.dumps(record))
    page = unescape(build_report([cpu], tmp_path / "out").read_text())
    assert "tune.json cannot be read" in page
    assert 'trials[2].elapsed_s is "late", not a number' in page
    with pytest.raises(tune_record.typed_json.RecordError, match=r"tune\.json is not a tune rec"):
        tune_record.read(cpu)
    del record["request"]
    (cpu / "tune.json").write_text(json.dumps(record))
    with pytest.raises(ValueError, match="request is missing"):
        tune_record.read(cpu)


def _holds(written: Any, disk: Any) -> bool:
    """Whether `written` (a record as its writer writes it) holds all that `disk` does: an
    older file lacks the fields added since, and a confirmation leaves out a null it need not
    write."""
    if isinstance(disk, dict):
        return isinstance(written, dict) and all(_holds(written.get(k), v) for k, v in disk.items())
    if isinstance(disk, list):
        return (
            isinstance(written, list)
            and len(written) == len(disk)
            and all(_holds(w, d) for w, d in zip(written, disk, strict=True))
        )
    return bool(written == disk)


def test_every_published_tune_and_confirmation_record_loads_as_written() -> None:
    root = Path(__file__).parent.parent / "results"
    tunes = [p.parent for p in root.rglob(tune_record.FILE)]
    confirmed = [p.parent for p in root.rglob(confirmations.FILE)]
    assert tunes and confirmed
    for run in [*tunes, DATA / "cnn-stopped"]:
        record = tune_record.read(run)
        written = json.loads(json.dumps(record.to_dict()))
        assert _holds(written, json.loads((run / tune_record.FILE).read_text()))
    for run in [*confirmed, DATA / "cnn-stopped"]:
        found = confirmations.read(run)
        assert found is not None and found.partitions
        written = json.loads(json.dumps([p.to_dict() for p in found.partitions]))
        disk = json.loads((run / confirmations.FILE).read_text())["partitions"]
        assert _holds(written, [{k: v for k, v in d.items() if v is not None} for d in disk])
        assert [set(w) - set(d) for w, d in zip(written, disk, strict=True)] == [set()] * len(disk)


def test_the_target_search_says_its_best_so_far_answer_and_runs(tmp_path: Path) -> None:
    cpu, _ = cpu_gpu_runs(tmp_path)
    shutil.copy(DATA / "target" / "tune_target.json", cpu)
    record = json.loads((cpu / "tune_target.json").read_text())
    page = build_report([cpu], tmp_path / "out").read_text()
    assert (tmp_path / "out" / "plots" / "search_target.png").read_bytes()[:8] == PNG
    text = " ".join(_search_text(page).split())
    c = record["covered"]
    n = len(record["trials"])
    assert f"Coverage: {c['measured']} of {c['space_size']} configurations run; {n} runs" in text
    stopped = sum(t["decision"] == "stopped" for t in record["trials"])
    assert f"{stopped} stopped ({stopped} hopeless)" in text
    a = record["answer"]
    assert f"Answer, as the search recorded it: {a['label']}: {a['describe']}." in text
    fastest = min(t["time_to_target_s"] for t in record["trials"] if t["decision"] == "reached")
    assert f"Fastest single run: {fastest:.3g} s of training to the target" in text
    table = page.split('src="plots/search_target.png"')[1].split("</table>")[0]
    assert table.count("<tr>") == 1 + n
    assert "Run on Optuna" not in text  # a record from before the search ran on Optuna


def test_the_target_search_names_its_optuna_study(tmp_path: Path) -> None:
    cpu, _ = cpu_gpu_runs(tmp_path)
    record = json.loads((DATA / "target" / "tune_target.json").read_text())
    record["optuna"] = {
        "sampler": "TPESampler",
        "pruner": "SuccessiveHalvingPruner",
        "reduction_factor": 3,
        "states": {"COMPLETE": 4, "PRUNED": 9},
    }
    (cpu / "tune_target.json").write_text(json.dumps(record))
    text = " ".join(_search_text(build_report([cpu], tmp_path / "out").read_text()).split())
    assert (
        "Run on Optuna: TPESampler and SuccessiveHalvingPruner (reduction factor 3); its "
        "trials: 4 complete, 9 pruned." in text
    )


def test_no_search_file_no_search_section_and_no_old_chart(tmp_path: Path) -> None:
    cpu, _ = cpu_gpu_runs(tmp_path)
    (cpu / "tune.json").write_text(json.dumps(built_record()))
    build_report([cpu], tmp_path / "out")
    assert (tmp_path / "out" / "plots" / "search.png").is_file()
    (cpu / "tune.json").unlink()
    page = build_report([cpu], tmp_path / "out").read_text()
    assert "<h2>Search</h2>" not in page and "search.png" not in page
    assert not (tmp_path / "out" / "plots" / "search.png").exists()


def test_an_unreadable_tune_json_is_said_not_fatal(tmp_path: Path) -> None:
    cpu, _ = cpu_gpu_runs(tmp_path)
    (cpu / "tune.json").write_text("{not json")
    page = build_report([cpu], tmp_path / "out").read_text()
    assert "tune.json cannot be read" in page


def test_a_trial_the_deadline_cut_is_drawn_as_cut(tmp_path: Path) -> None:
    record = built_record()
    record["trials"][5] |= {"outcome": "cut", "cut": True}
    (tmp_path / "tune.json").write_text(json.dumps(record))
    fig = search_speed.figure(tune_record.read(tmp_path), "run")
    labels = [line.get_label() for line in fig.axes[0].lines if line.get_gid() == "trial"]
    plt.close(fig)
    assert labels.count("cut by the deadline") == 1  # was "fate not recorded"
