"""Every file a run folder holds is a typed record in gpubench/store with its reader beside its
writer: what the writer writes reads back the same, a folder without the file reads as None,
and a file that is not what the writer writes is one line naming the file (exit status 2 from
the command line, never a traceback). tune_rows.jsonl, appended line by line, has the results
file's torn-tail repair. Tiny files in tmp_path: nothing is trained."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pytest

from gpubench.cli.main import main
from gpubench.config.errors import ConfigError
from gpubench.config.spec import Point
from gpubench.run import phases, shard
from gpubench.store import (
    batch_analysis_record,
    maxbatch_record,
    phases_record,
    shard_record,
    suite_record,
    target_runs,
    tune_rows,
    typed_json,
)
from gpubench.store.batch_analysis_record import BatchAnalysisRecord
from gpubench.store.phases_record import Phase, PhasesRecord, PointTime
from gpubench.store.results import REJECTED_SUFFIX, RESULTS_FILE, ResultsError, repair_tail
from gpubench.store.row import make_row
from gpubench.store.shard_record import ShardRecord

PACKAGE = Path(__file__).resolve().parent.parent / "gpubench"


def _row(batch: int, **values: object) -> dict[str, object]:
    return make_row(Point("mlp", "tiny", "cpu", "fp32", "sgd", batch), "ok", **values)


def _one_line(error: BaseException, path: Path) -> None:
    """`error` is one line that names the file `path`."""
    text = str(error)
    assert "\n" not in text and str(path) in text, text


# ---- round trip and absence, one record at a time


def test_a_shard_record_reads_back_and_is_none_where_absent(tmp_path: Path) -> None:
    assert shard_record.read(tmp_path) is None
    ShardRecord(2, 3).write(tmp_path)
    assert shard_record.read(tmp_path) == ShardRecord(2, 3)
    written = json.loads((tmp_path / shard_record.FILE).read_text())
    assert written == {"index": 2, "count": 3, "whole_series": False}
    # the run folder's shard as a resume reads it, and a resume of another shard refused
    assert shard.saved(tmp_path, None) == ShardRecord(2, 3)
    with pytest.raises(ConfigError, match="holds shard 2/3, not 1/3"):
        shard.saved(tmp_path, (1, 3))


def test_a_phases_record_reads_back_and_is_none_where_absent(tmp_path: Path) -> None:
    assert phases_record.read(tmp_path) is None
    record = PhasesRecord(
        10.0, (Phase("points", 10.0, 12.5),), (PointTime("mlp cpu fp32 sgd B=4", 10, 11, 12, 0),)
    )
    record.write(tmp_path)
    assert phases_record.read(tmp_path) == record
    # the file is what the sweep has always written (indent 1, these keys in this order)
    text = (tmp_path / phases_record.FILE).read_text()
    assert text.startswith('{\n "started": 10.0,\n "phases": [')
    assert list(json.loads(text)["points"][0]) == ["point", "start", "end", "written", "worker_s"]
    phases.add_phase(tmp_path, "report", 12.5, 13.0)
    again = phases_record.read(tmp_path)
    assert again is not None and [p.phase for p in again.phases] == ["points", "report"]
    assert again.points == record.points
    phases.add_phase(tmp_path / "none", "report", 0.0, 1.0)  # no phases.json: left without one
    assert not (tmp_path / "none").exists()


def test_a_suite_record_reads_back_and_is_none_where_absent(tmp_path: Path) -> None:
    assert suite_record.read(tmp_path) is None
    saved = {"name": "quick", "models": ["mlp"], "budget": {"max_time_s": 1.5}}
    suite_record.write(tmp_path, saved)
    assert suite_record.read(tmp_path) == saved


def test_a_batch_analysis_reads_back_and_is_none_where_absent(tmp_path: Path) -> None:
    assert batch_analysis_record.read(tmp_path) is None
    group = {"model": "mlp", "recommended_batch_size": 32, "fit": {"b_crit": None}}
    BatchAnalysisRecord((group,)).write(tmp_path)
    assert batch_analysis_record.read(tmp_path) == BatchAnalysisRecord((group,))
    assert json.loads((tmp_path / batch_analysis_record.FILE).read_text()) == {"groups": [group]}
    (tmp_path / batch_analysis_record.FILE).write_text("{}")  # no series analysed
    assert batch_analysis_record.read(tmp_path) == BatchAnalysisRecord(())


def test_a_maxbatch_plan_and_search_read_back_and_are_none_where_absent(tmp_path: Path) -> None:
    assert maxbatch_record.read_plan(tmp_path) is None
    assert maxbatch_record.read_search(tmp_path) is None
    plan = {"model=mlp device=cpu": {"largest_batch": 64, "stopped": None}}
    maxbatch_record.write_plan(tmp_path, plan)
    assert maxbatch_record.read_plan(tmp_path) == plan
    shared = tmp_path / "plans" / "shared.json"
    shared.parent.mkdir()
    maxbatch_record.write_shared(shared, plan)
    maxbatch_record.write_shared(shared, {})  # rewritten in place, shorter
    assert maxbatch_record.parse_plan(shared) == {}
    name = maxbatch_record.mode_file("blocks")
    maxbatch_record.write_search(tmp_path, name, {"model": "mlp", "largest_batch": 128})
    assert maxbatch_record.read_search(tmp_path, name) == {"model": "mlp", "largest_batch": 128}


def test_tune_rows_read_back_in_order_and_are_none_where_absent(tmp_path: Path) -> None:
    assert tune_rows.read(tmp_path) is None
    rows = [_row(4, tune_round=0), _row(8, tune_round=0), _row(4, tune_round=1)]
    for r in rows:
        tune_rows.append(tmp_path, r)
    assert tune_rows.read(tmp_path) == rows
    assert not (tmp_path / RESULTS_FILE).exists()  # a file of its own


# ---- a torn last line of tune_rows.jsonl: the results file's repair


def test_a_torn_last_tune_row_is_skipped_on_read_and_moved_aside_by_the_repair(
    tmp_path: Path,
) -> None:
    path = tmp_path / tune_rows.FILE
    whole = _row(4, tune_round=0)
    tune_rows.append(tmp_path, whole)
    with open(path, "ab") as f:
        f.write(b'{"model": "mlp", "batch_si')  # a crash mid-append
    with pytest.warns(UserWarning, match="skipping its last line"):
        assert tune_rows.read(tmp_path) == [whole]
    with pytest.warns(UserWarning, match="moved its last line"):
        repair_tail(path)
    rejected = path.with_name(path.name + REJECTED_SUFFIX)
    assert rejected.read_bytes() == b'{"model": "mlp", "batch_si\n'
    tune_rows.append(tmp_path, _row(8, tune_round=0))  # appends after the last whole row
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [r["batch_size"] for r in tune_rows.read(tmp_path) or []] == [4, 8]


def test_target_runs_append_repair_and_read_as_the_results_file_does(tmp_path: Path) -> None:
    # issue 51: sweep --confirm-target's runs, a file of rows of its own
    assert target_runs.read(tmp_path) == []
    first, second = _row(4, seed=0), _row(16, seed=0)
    target_runs.append(tmp_path, first)
    path = tmp_path / target_runs.FILE
    with open(path, "ab") as f:
        f.write(b'{"model": "mlp", "batch_si')  # a crash mid-append
    with pytest.warns(UserWarning, match="skipping its last line"):
        assert target_runs.read(tmp_path) == [first]
    with pytest.warns(UserWarning, match="moved its last line"):
        target_runs.repair(tmp_path)  # a resume, before appending again
    target_runs.append(tmp_path, second)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert target_runs.read(tmp_path) == [first, second]
    assert not (tmp_path / RESULTS_FILE).exists()
    path.write_text(path.read_text().replace('"batch_size": 4', '"batch_size": "four"'))
    with pytest.raises(ResultsError, match=r"line 1: batch_size is 'four'") as error:
        target_runs.read(tmp_path)  # a resume does not read past it
    _one_line(error.value, path)
    with pytest.warns(UserWarning, match="that row is left out"):
        assert target_runs.read(tmp_path, skip_odd=True) == [second]  # a reader goes on


def test_a_corrupt_tune_row_before_the_last_is_one_line_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / tune_rows.FILE
    path.write_text("{garbage\n" + json.dumps(_row(4, tune_round=0)) + "\n")
    with pytest.raises(ResultsError, match=r"line 1: corrupt row") as error:
        tune_rows.read(tmp_path)
    _one_line(error.value, path)
    with pytest.raises(ResultsError, match=r"line 1: corrupt row"):
        repair_tail(path)  # nothing is appended after it


# ---- corrupt files: one line naming the file


CORRUPT = {"cut short": '{"index": ', "the wrong kind": "[1, 2]"}


@pytest.mark.parametrize("text", list(CORRUPT.values()), ids=list(CORRUPT))
def test_a_corrupt_record_is_one_line_naming_the_file(tmp_path: Path, text: str) -> None:
    readers = {
        shard_record.FILE: shard_record.read,
        phases_record.FILE: phases_record.read,
        suite_record.FILE: suite_record.read,
        batch_analysis_record.FILE: batch_analysis_record.read,
        maxbatch_record.FILE: maxbatch_record.read_search,
    }
    for name, read in readers.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(typed_json.RecordError) as error:
            read(tmp_path)
        _one_line(error.value, tmp_path / name)
    with pytest.raises(ConfigError, match="batch-size plan") as plan_error:
        maxbatch_record.read_plan(tmp_path)
    _one_line(plan_error.value, tmp_path / maxbatch_record.FILE)


def test_a_record_of_the_wrong_fields_says_which(tmp_path: Path) -> None:
    (tmp_path / shard_record.FILE).write_text('{"index": 1, "count": "2"}')
    with pytest.raises(typed_json.RecordError, match=r"count is \"2\", not a whole number"):
        shard_record.read(tmp_path)
    (tmp_path / phases_record.FILE).write_text('{"started": 1, "phases": [{"phase": "x"}]}')
    with pytest.raises(typed_json.RecordError, match=r"phases\[0\]\.start is missing"):
        phases_record.read(tmp_path)
    (tmp_path / maxbatch_record.FILE).write_text('{"largest_batch": 1.5}')
    with pytest.raises(typed_json.RecordError, match="no whole-number largest_batch"):
        maxbatch_record.read_search(tmp_path)
    (tmp_path / maxbatch_record.FILE).write_text('{"a key": {"stopped": null}}')
    with pytest.raises(ConfigError, match="is no batch-size plan"):
        maxbatch_record.read_plan(tmp_path)


@pytest.mark.parametrize("name", [suite_record.FILE, batch_analysis_record.FILE, "shard.json"])
def test_explain_on_a_folder_with_a_corrupt_record_says_so_in_one_line(
    tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    rows = [_row(4, samples_per_s=100.0, step_time_s=0.04), _row(8, samples_per_s=150.0)]
    (run / RESULTS_FILE).write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "suite.json").write_text(json.dumps({"name": "quick", "models": ["mlp"]}))
    (run / name).write_text('{"cut short": ')
    if name == suite_record.FILE:  # it only names the run's suite: read without it, with a note
        with pytest.warns(UserWarning, match=f"{run / name}.*; read without it"):
            assert main(["explain", str(run)]) == 0
        return
    assert main(["explain", str(run)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(run / name) in err and "Traceback" not in err, err


# ---- the one spelling of each name


def test_the_results_files_name_is_spelled_once_and_records_are_read_in_store() -> None:
    """`results.jsonl` appears once in the package (its constant), and no module outside
    gpubench/store reads a file's JSON by hand."""
    spelled, by_hand = [], []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for n, line in enumerate(text.splitlines(), 1):
            where = f"{path.relative_to(PACKAGE.parent)}:{n}"
            if "results.jsonl" in line:
                spelled.append(where)
            if re.search(r"json\.loads\(.*read_text", line) and path.parent.name != "store":
                by_hand.append(where)
    assert len(spelled) == 1 and spelled[0].startswith("gpubench/store/results.py:"), spelled
    assert by_hand == []
