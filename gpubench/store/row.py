"""The result row: its stable columns (units in the names) and how a row is made."""

from __future__ import annotations

import math
from typing import Any

from gpubench.config.keys import IDENTITY
from gpubench.config.spec import Point
from gpubench.store import env

STATUSES = ("ok", "oom", "diverged", "unsupported", "timeout", "error")

# The flat columns of a row, in order (units in the names). A value that cannot be measured on
# this device is None, never 0 and never a guess. Raw series (step_times_s) live only in the JSONL.
COLUMNS = [
    *IDENTITY,
    "status",
    "error",
    "optimizer_impl",
    "parameters",
    "samples_per_step",
    "tokens_per_step",
    "warmup_steps",
    "warmup_time_s",
    "steps_measured",
    "step_time_s",
    "step_time_mean_s",
    "step_time_iqr_s",
    "step_time_p90_s",
    "step_time_cv",
    "step_time_ci_rel",
    "noisy",
    "wall_time_s",
    "samples_per_s",
    "tokens_per_s",
    "flops_per_step",
    "tflops",
    "mfu",
    "torch_peak_allocated_bytes",
    "torch_peak_reserved_bytes",
    "nvml_peak_used_bytes",
    "host_peak_rss_bytes",
    "energy_j_per_step",
    "avg_power_w",
    "gpu_util_pct",
    "loss_first",
    "loss_last",
    "eval_loss",
    "eval_accuracy",
    "steps_to_target",
    "time_to_target_s",
    "torch_threads",
    "point_time_s",
    # measurement detail (issue 3): how each number was obtained, and what it is checked against
    "step_timer",
    "step_time_sum_s",
    "flops_analytic_per_step",
    "flops_optimizer_per_step",
    "flops_method",
    "peak_tflops",
    "datasheet_peak_tflops",
    "memory_parameters_bytes",
    "memory_gradients_bytes",
    "memory_optimizer_bytes",
    "memory_activations_bytes",
    "memory_remainder_bytes",
    "memory_inputs_bytes",
    "nvml_process_peak_used_bytes",
    "samples_per_j",
    "energy_method",
    "sm_clock_mhz",
    "temperature_c",
    "throttle_reasons",
    "nvml_sample_hz",
    "compile_time_s",
    "graph_capture_time_s",
    # convergence runs (mode = "convergence")
    "samples_to_target",
    "dataset",
    "dataset_sha256",
    "target_metric",
    "target",
    "lr",
    "lr_base",
    "lr_base_batch_size",
    "lr_warmup_steps",
    "eval_time_s",
    "diverged_at_step",
    "noise_scale_b_simple",  # before issue 51: from extra passes (old rows only)
    # issue 51: B_noise from the training steps' own micro-batch norms (science.convergence)
    "noise_scale_b_noise",
    "noise_scale_b_noise_low",
    "noise_scale_b_noise_high",
    "noise_scale_b_noise_preconditioned",
    "noise_scale_b_noise_preconditioned_low",
    "noise_scale_b_noise_preconditioned_high",
    "noise_scale_steps",
    "noise_scale_first_step",
    "noise_scale_last_step",
    "noise_scale_skipped_steps",
    "noise_scale_micro_batches",
    "noise_scale_split",
    "noise_scale_step_overhead",
    "noise_scale_time_overhead",
    # busy machine (issue 14): the load while the point ran, and whether that was contended
    "other_load_cores",
    "busy",
    "workload",  # issue 14: the Workload's own name (a user's model names itself there)
    # issue 13: the fraction of the measured matmul roof (`mfu` is against the datasheet peak),
    # and whether warm-up ended on steady step times (not on budget.warmup_max_s)
    "matmul_roof_fraction",
    "warmup_steady",
    # issue 29: the budget's deadline (tune's) stopped warm-up or measurement before its rule
    "deadline_cut",
    # issue 13: the energy figure's error bound (counter or power integral, issue 28), why energy
    # is null, the counter's update period
    "energy_error_rel",
    "energy_note",
    "energy_counter_resolution_s",
    # parallel points (issue 17); samples_per_s and step_time_s are the whole group's
    "world_size",
    "backend",
    "global_batch_size",
    "per_process_batch_size",
    "per_process_samples_per_s",
    "slowest_rank_step_time_s",
    "rank_step_time_spread",
    "collective_time_s",
    "collective_fraction",
    "collective_method",
    "rank_peak_rss_bytes",
    "rank_peak_allocated_bytes",
    "rank_parameters_bytes",
    "rank_model_state_bytes",
    "scaling_efficiency",
    "scaling_baseline_samples_per_s",
    # why (issue 15): where the step's time goes (profile), its roofline place, its bottleneck
    "profile_step_time_s",
    "busy_fraction",
    "dispatch_s",
    "top_category",
    "top_category_fraction",
    "bytes_per_step",
    "intensity_flop_per_byte",
    "achieved_gb_per_s",
    "peak_bandwidth_gb_per_s",
    "bottleneck",
    "bottleneck_evidence",
    "cpu_energy_j_per_step",
    "cpu_samples_per_j",
    "cpu_energy_note",  # issue 23: why the CPU energy is null where RAPL is there
]
# issue 16: the worker's peak virtual address space (Linux VmPeak, its lifetime's: a point's own
# in a fresh worker, as max-batch's probes run), what --max-memory caps on the CPU
COLUMNS += ["host_peak_address_space_bytes"]
# issue 28: the worker's address space when the point started (torch and its libraries: 0.7 GB
# with a CPU build, 3-4 GB with a CUDA one); --max-memory on the CPU caps what is mapped beyond it
COLUMNS += ["host_address_space_start_bytes"]
# issue 24: the round of `tune`'s search the row was measured in (0, 1, 2: each measures 3x
# longer than the one before; 2 is a sweep's own measurement); None outside a tune
COLUMNS += ["tune_round"]
# issue 23: a parallel point's processes x threads over the node's cores (its ranks take turns)
COLUMNS += ["oversubscribed"]
# issue 23: the machine that measured the row (its hostname) and what that machine calls the
# row's device (the GPU's name, or the CPU model): merged folders hold rows of several machines.
# Rows written before these columns load with them null; the report then reads env.json.
COLUMNS += ["host", "device_name"]
# issue 23: a scaling efficiency computed from a noisy row or a noisy baseline (science.scaling)
COLUMNS += ["scaling_efficiency_noisy"]
# issue 25: the samples of one forward/backward pass (a process's batch / accumulate), the passes
# per optimizer step, and the FLOPs activation checkpointing recomputed (part of flops_per_step;
# mfu leaves them out). `checkpoint` is an identity column.
COLUMNS += ["micro_batch_size", "accumulation_steps", "flops_recomputed_per_step"]
# issue 31: the loader's wait per measured step (median seconds, and the sum of waits over the
# sum of step times), the model's rate without the wait, the pipeline's own rate with no model,
# the loader's CPU seconds per batch (workers and the training thread's next()), its data
COLUMNS += ["input_wait_s", "input_wait_share", "model_samples_per_s", "pipeline_samples_per_s"]
COLUMNS += ["loader_cpu_s_per_step", "loader_dataset"]
# Columns that hold words, not numbers (the report keeps them as text).
TEXT = ["status", "error", "optimizer_impl", "workload", "step_timer", "flops_method"]
TEXT += ["energy_method", "energy_note", "throttle_reasons", "dataset", "dataset_sha256"]
TEXT += ["target_metric", "backend", "collective_method"]
TEXT += ["top_category", "bottleneck", "bottleneck_evidence"]  # issue 15
TEXT += ["cpu_energy_note"]
TEXT += ["host", "device_name"]  # issue 23
# issue 32 (energy and cost): how the CPU's energy was had (`rapl`: measured; issue 49:
# `stated`: the user's --cpu-watts, whose watts `cpu_watts` holds, over the row's measured time),
# and RAPL's DRAM domains. Rows written before issue 49 may hold a TDP estimate's columns
# (cpu_*_estimate*, cpu_busy_cores, cpu_tdp_*): they load as extra columns and nothing reads them.
COLUMNS += ["cpu_energy_method", "cpu_dram_energy_j_per_step", "cpu_watts"]
# convergence rows: joules over the training until the target was first met (evaluations left
# out, as from time_to_target_s): the GPU's (NVML counter), the CPU's (RAPL, or stated)
COLUMNS += ["energy_to_target_j", "cpu_energy_to_target_j"]
# cost at the sweep's --price (run.cost): dollars per hour of the devices the point held, per
# million samples, per epoch of `epoch_samples`, and to target (a convergence row)
COLUMNS += ["usd_per_hour", "usd_per_million_samples", "epoch_samples", "usd_per_epoch"]
COLUMNS += ["usd_to_target"]
# issue 41: set when a run's rows are read with its confirm.json (science.remeasured), never by a
# worker (null in results.csv): whether the row's configuration was re-measured by the verdict
# (the frame's samples_per_s is then that figure), the row's own figure, the re-measured one's
# 95% interval between processes, and whether the row's own interval missed it
COLUMNS += ["remeasured", "sweep_samples_per_s", "remeasured_low_samples_per_s"]
COLUMNS += ["remeasured_high_samples_per_s", "unstable"]
TEXT += ["cpu_energy_method"]
# issue 53: a device pool's row (run.pool): the devices its worker saw (CUDA_VISIBLE_DEVICES), and
# the most points measured beside it on the node while it ran; null outside a pool
COLUMNS += ["pool_devices", "points_beside"]
TEXT += ["pool_devices"]
TEXT += ["loader", "loader_dataset"]  # issue 31

SERIES = ["step_times_s", "curve"]
SERIES += ["traceback"]  # issue 13: an `error` row's Python traceback (JSONL only, not the CSV)
SERIES += ["ranks"]  # issue 17: per-rank figures of a parallel point
SERIES += ["profile"]  # issue 15: the step-time breakdown by category (JSONL only)
SERIES += ["input_wait_times_s"]  # issue 31: each measured step's wait for its batch
# Columns renamed since: rows written under the old name load under the new one.
RENAMED = {"step_time_device_sum_s": "step_time_sum_s"}


def make_row(point: Point, status: str, **values: Any) -> dict[str, Any]:
    """A complete row: the point's identity, `status`, `values`, and None for the rest. `host`
    and `device_name` are this machine's (the process that makes the row is on the machine that
    measured it) unless `values` names them."""
    assert status in STATUSES, status
    unknown = set(values) - set(COLUMNS) - set(SERIES)
    assert not unknown, f"columns not in the schema: {sorted(unknown)}"
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(point.to_dict())
    row["status"] = status
    row["host"] = env.hostname()
    row["device_name"] = env.device_name(point.device)
    # issue 25: a single process's row of any status (oom, unsupported) says its micro-batch; a
    # parallel point's maker gives it (a rank's batch is the harness's to say)
    row["accumulation_steps"] = point.accumulate
    if point.parallel == "none" and point.batch_size % point.accumulate == 0:
        row["micro_batch_size"] = point.batch_size // point.accumulate
    row.update({k: finite_or_none(v) for k, v in values.items()})
    return row


def finite_or_none(value: Any) -> Any:
    """JSON has no NaN or infinity: an unmeasurable float is stored as None, at any depth (the
    floats inside a series such as `curve` or `step_times_s` too), so that every row made by
    make_row can be stored (the results store refuses NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_or_none(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_or_none(v) for v in value]
    return value
