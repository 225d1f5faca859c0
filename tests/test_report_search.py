"""The report's search section (gpubench.report.search) from a synthetic tune.json and
tune_target.json: drawn only where a run holds one, with its chart and its table of what was
pruned when."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from gpubench.report.build import build_report
from tests.report_fixture import cpu_gpu_runs

PNG = b"\x89PNG\r\n\x1a\n"


def tune_json() -> dict[str, Any]:
    """A speed search: 6 trials in round 0 (4 pruned), 2 in round 1, the winner confirmed."""
    trials = []
    t, best = 0.0, None
    plan = [(0, 8, 900.0, "pruned"), (0, 32, 2400.0, "kept"), (0, 128, 3100.0, "kept")]
    plan += [(0, 512, 2000.0, "pruned"), (0, 4, 300.0, "pruned"), (0, 1024, None, "error")]
    plan += [(1, 32, 2350.0, "pruned"), (1, 128, 3050.0, "confirmed")]
    for i, (rnd, b, sps, status) in enumerate(plan):
        start, t = t, t + 2.0 * (rnd + 1)
        if sps is not None:
            best = sps if best is None else max(best, sps)
        trials.append(
            {
                "id": i,
                "config": {"batch_size": b, "precision": "bf16", "compile": "eager"},
                "round": rnd,
                "budget_s": 2.0 * (rnd + 1),
                "samples_per_s": sps,
                "status": status,
                "t_start_s": start,
                "t_end_s": t,
                "best_so_far": best,
                "a_key_this_reader_does_not_know": [1, 2],
            }
        )
    return {
        "version": 1,
        "model": "mlp",
        "device": "cpu",
        "budget_s": 60.0,
        "elapsed_s": t,
        "space": {"batch_sizes": [4, 8, 32, 128, 512, 1024]},
        "covered": {"measured": 6, "space_size": 24},
        "trials": trials,
        "answer": {"config": {"batch_size": 128, "precision": "bf16"}, "label": "B=128 bf16"},
    }


def tune_target_json() -> dict[str, Any]:
    def run(i, b, rung, seed, limit, best, ttt, decision, reason, start, end):
        return {
            "id": i,
            "config": {"batch_size": b, "lr_scaling": "sqrt", "lr_base": 0.003, "lr": 0.003},
            "label": f"B={b} lr=0.003 (sqrt)",
            "rung": rung,
            "seed": seed,
            "limit_s": limit,
            "elapsed_s": limit if ttt is None else ttt,
            "metric": "eval_accuracy",
            "best_metric": best,
            "time_to_target_s": ttt,
            "status": "ok",
            "decision": decision,
            "reason": reason,
            "t_start_s": start,
            "t_end_s": end,
        }

    trials = [
        run(0, 8, 0, 0, 1.0, 0.6, None, "kept", "in the top 1/3", 0.0, 3.0),
        run(1, 32, 0, 0, 1.0, 0.3, None, "stopped", "pruned: not in the top 1/3", 3.0, 5.0),
        run(2, 128, 0, 0, 1.0, 0.2, None, "stopped", "pruned: not in the top 1/3", 5.0, 7.0),
        run(0, 8, 1, 0, 3.0, 0.92, 2.1, "reached", "reached the target in 2.1 s", 7.0, 11.0),
        run(0, 8, 2, 1, 3.0, 0.91, 2.4, "seed", "the answer re-run on seed 1", 11.0, 15.0),
    ]
    return {
        "version": 1,
        "kind": "target",
        "model": "mlp",
        "dataset": "digits",
        "metric": "eval_accuracy",
        "target": 0.9,
        "budget_s": 60.0,
        "elapsed_s": 15.0,
        "rungs_s": [1.0, 3.0],
        "covered": {"measured": 3, "space_size": 3},
        "trials": trials,
        "answer": {"label": "B=8", "describe": "2.25 s median over 2 seeds (2.1-2.4 s)"},
    }


def test_the_search_section_draws_the_search_and_what_was_pruned_when(tmp_path: Path) -> None:
    cpu, _ = cpu_gpu_runs(tmp_path)
    (cpu / "tune.json").write_text(json.dumps(tune_json()))
    (cpu / "tune_target.json").write_text(json.dumps(tune_target_json()))
    page = build_report([cpu], tmp_path / "out").read_text()
    plots = tmp_path / "out" / "plots"
    assert "<h2>Search</h2>" in page
    for png in ("search.png", "search_target.png"):
        assert f'src="plots/{png}"' in page
        assert (plots / png).read_bytes()[:8] == PNG
    speed = page.split('src="plots/search.png"')[1].split('src="plots/search_target.png"')[0]
    # the table: a row per trial, the pruned ones with the wall time they were pruned at
    assert speed.count("<tr>") == 1 + 8
    pruned = re.findall(r"<td>pruned</td><td class=\"n\"[^>]*>([^<]*)</td>", speed)
    assert pruned == ["2 s", "8 s", "10 s", "16 s"]
    assert "batch_size=128 precision=bf16 compile=eager" in speed
    assert "6 of 24 configurations measured" in speed and "Answer: B=128 bf16" in speed
    target = page.split('src="plots/search_target.png"')[1]
    assert target.count("<tr>") >= 1 + 5
    assert "stopped: pruned: not in the top 1/3" in target and "seed re-runs" in target
    assert "2.25 s median over 2 seeds" in target


def test_no_search_file_no_search_section_and_no_old_chart(tmp_path: Path) -> None:
    cpu, _ = cpu_gpu_runs(tmp_path)
    (cpu / "tune.json").write_text(json.dumps(tune_json()))
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
