"""The loader data mode's pieces (issue 31): the files written once, the pipelines that read them,
the axes and their checks, and the verdict's rules on synthetic rows."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gpubench import models
from gpubench.cli import main
from gpubench.config import loader as axes
from gpubench.config.errors import ConfigError
from gpubench.config.spec import SweepSpec
from gpubench.config.validate import validate
from gpubench.data import files, text
from gpubench.data.pipelines import LoaderSettings, PngImages, build_loader
from gpubench.science.bottleneck import classify
from gpubench.science.input_bound import input_evidence, workers_lever
from gpubench.science.partition import label


def _settings(batch: int = 4, workers: int = 0) -> LoaderSettings:
    return LoaderSettings(batch, workers, False, None, False)


def test_images_are_written_once_as_png_and_decoded_to_the_models_shape() -> None:
    folder = files.image_folder((3, 16, 16))
    first = sorted(folder.glob("*.png"))
    assert len(first) == files.meta(folder)["count"] > 1000
    stamp = first[0].stat().st_mtime_ns
    assert files.image_folder((3, 16, 16)) == folder  # the cached folder, not written again
    assert first[0].stat().st_mtime_ns == stamp
    plain = PngImages(folder, augment=False)
    x, y = plain[0]
    assert x.shape == (3, 16, 16) and x.dtype == torch.float32 and 0 <= y < 10
    # normalised with the files' own channel statistics: about zero mean over many samples
    many = torch.stack([plain[i][0] for i in range(200)])
    assert abs(float(many.mean())) < 0.3


def test_augmentation_crops_and_flips_only_the_convolutional_models_images() -> None:
    cnn = models.build("cnn", "tiny")
    loader, what = build_loader(cnn, _settings())
    assert "random crop, flip" in what
    dataset = loader.dataset
    torch.manual_seed(0)
    views = {tuple(dataset[5][0].flatten()[:64].tolist()) for _ in range(8)}
    assert len(views) > 1  # the same sample, augmented differently each time
    mlp = models.build("mlp", "tiny")
    _, plain = build_loader(mlp, _settings())
    assert plain.startswith("digits PNG 1x8x8") and "crop" not in plain


def test_tokens_are_read_by_offset_as_the_corpus_holds_them() -> None:
    workload = models.build("transformer", "tiny")
    loader, what = build_loader(workload, _settings(batch=2))
    assert "by offset" in what
    x, y = loader.dataset[3]
    seq = workload.tokens_per_sample
    corpus = text.encode(text.corpus()[0])
    window = corpus[3 * seq : 3 * seq + seq + 1] % 64  # the tiny transformer's vocabulary
    assert np.array_equal(x.numpy(), window[:-1]) and np.array_equal(y.numpy(), window[1:])


def test_a_users_factory_gives_a_dataset_or_its_own_loader() -> None:
    mlp = models.build("mlp", "tiny")
    loader, _ = build_loader(mlp, _settings(batch=8), "loader_datasets:slow")
    assert loader.batch_size == 8 and loader.drop_last
    _, what = build_loader(mlp, _settings(batch=8), "loader_datasets:own_loader")
    assert "its own DataLoader" in what
    with pytest.raises(ValueError, match="returned int, not a Dataset or DataLoader"):
        build_loader(mlp, _settings(), "loader_datasets:not_data")
    with pytest.raises(ValueError, match="cannot load loader 'no_such_module:f'"):
        build_loader(mlp, _settings(), "no_such_module:f")


def test_auto_axes_resolve_from_the_machine_and_collapse_at_zero_workers() -> None:
    assert axes.auto_workers(16) == axes.AUTO_WORKERS_MAX and axes.auto_workers(1) == 0
    lays = axes.layouts("cpu", (0, 2), (None,), (None, 4), (True, False))
    assert lays[0] == dict(
        loader_workers=0, pin_memory=False, prefetch=None, persistent_workers=False
    )
    assert len(lays) == 1 + 2 * 2  # 0 workers: one layout whatever prefetch and persistence
    assert axes.layouts("cuda", (2,), (None,), (None,), (True,))[0]["pin_memory"] is True
    spec = SweepSpec("s", ("mlp",), devices=("cpu",), data="loader", loader_workers=(0, 2))
    points = validate(spec).points()
    assert sorted({p.loader_workers for p in points}) == [0, 2]
    assert {p.label().split(" worker")[0].split()[-1] for p in points} == {"0", "2"}


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--loader-workers", "-1", "invalid loader worker count -1"),
        ("--pin-memory", "maybe", "invalid pin_memory 'maybe'"),
        ("--prefetch", "0", "invalid prefetch 0"),
    ],
)
def test_a_bad_loader_value_is_one_line_naming_it(
    flag: str, value: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sweep", "--data", "loader", flag, value]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_a_factory_with_other_data_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"loader 'a\.b:c' with data 'device'"):
        validate(SweepSpec("s", ("mlp",), loader="a.b:c"))
    with pytest.raises(ConfigError, match=r"invalid loader 'a\.b'"):
        validate(SweepSpec("s", ("mlp",), data="loader", loader="a.b"))


def _row(workers: int, share: float, samples: float, pipeline: float) -> dict:
    return dict(
        status="ok", model="mlp", model_size="tiny", device="cpu", precision="fp32",
        optimizer="sgd", batch_size=8, data="loader", loader_workers=workers,
        prefetch=None if workers == 0 else 2, persistent_workers=workers > 0, pin_memory=False,
        input_wait_share=share, input_wait_s=share * 0.1, step_time_s=0.1,
        samples_per_s=samples, pipeline_samples_per_s=pipeline, model_samples_per_s=200.0,
    )  # fmt: skip


def test_the_input_rule_and_the_worker_lever_on_synthetic_rows() -> None:
    starved, fed = _row(0, 0.6, 80.0, 90.0), _row(4, 0.05, 224.0, 400.0)
    assert classify(starved).kind == "input"  # type: ignore[union-attr]
    assert "waits 60% of the step" in (input_evidence(starved) or "")
    assert input_evidence(fed) is None
    assert input_evidence(_row(0, axes_share := 0.19, 80.0, 90.0)) is None, axes_share
    lines, todo = workers_lever(fed, [starved, fed], margin=0.03)
    assert lines == ["4 workers: x2.80 the samples/s of 0 workers (the pipeline alone x4.44)"]
    assert todo is None  # the fastest is no longer input-bound
    still = _row(4, 0.5, 120.0, 130.0)
    _, todo = workers_lever(still, [starved, still], margin=0.03)
    assert todo == "measure more loader workers: --loader-workers 4,8"
    assert label(fed).endswith("B=8 4 workers")


def test_the_loaders_workers_are_the_points_own_processes_and_their_cpu_is_counted() -> None:
    import os

    from gpubench.config.spec import Point
    from gpubench.harness.input_wait import LoaderBatches
    from gpubench.probes import process_tree

    point = Point(
        "mlp", "tiny", "cpu", "fp32", "sgd", 8, data="loader", loader_workers=2,
        pin_memory=False, prefetch=2, persistent_workers=True, loader="loader_datasets:slow",
    )  # fmt: skip
    batches = LoaderBatches(point, models.build("mlp", "tiny"))
    for _ in range(4):
        x, y = batches.next()
    assert x.shape == (8, 1, 8, 8) and y.shape == (8,)
    pids = [w.pid for w in batches._it._workers]
    # descendants of this process: the busy-machine check counts them as the point's own
    assert set(pids) <= set(process_tree.tree(os.getpid()))
    batches.read_workers()
    assert set(batches._worker_cpu_s) == set(pids)
    assert batches.cpu_s() >= sum(batches._worker_cpu_s.values())
    assert len(batches.next_s) == batches.batches == 4


def test_the_pipeline_rate_skips_what_the_workers_loaded_ahead_at_torchs_default() -> None:
    # --prefetch auto leaves the DataLoader's default of 2 batches a worker: those were loaded
    # while the model trained and cost nothing to take, so the rate must skip them too
    from gpubench.config.spec import Point
    from gpubench.harness.input_wait import LoaderBatches

    def ahead(workers: int, prefetch: int | None) -> int:
        point = Point(
            "mlp", "tiny", "cpu", "fp32", "sgd", 8, data="loader", loader_workers=workers,
            pin_memory=False, prefetch=prefetch, persistent_workers=False,
            loader="loader_datasets:slow",
        )  # fmt: skip
        return LoaderBatches(point, models.build("mlp", "tiny")).loaded_ahead()

    assert (ahead(2, None), ahead(2, 3), ahead(0, None)) == (4, 6, 0)


def test_an_iterable_data_set_of_no_length_starts_a_new_epoch_when_it_ends() -> None:
    from gpubench.config.spec import Point
    from gpubench.harness.input_wait import LoaderBatches

    point = Point(
        "mlp", "tiny", "cpu", "fp32", "sgd", 8, data="loader", loader_workers=0,
        pin_memory=False, persistent_workers=False, loader="loader_datasets:stream",
    )  # fmt: skip
    batches = LoaderBatches(point, models.build("mlp", "tiny"))
    seen = [batches.next()[1].tolist() for _ in range(5)]  # 2 full batches a pass of 20
    assert seen[0] == seen[2] == seen[4] and seen[1] == seen[3] and seen[0] != seen[1]


def test_an_input_bound_fastest_gets_the_worker_lever_and_the_next_experiment() -> None:
    from gpubench.science.levers import levers

    starved, best = _row(0, 0.6, 80.0, 90.0), _row(2, 0.4, 150.0, 160.0)
    lines, todo = levers("input", best, [starved, best], [starved, best], ["loader_workers"])
    assert "2 workers: x1.88 the samples/s of 0 workers (the pipeline alone x1.78)" in lines
    assert "batches made on the device: not measured" in lines
    assert todo == "measure more loader workers: --loader-workers 2,4"


def test_tune_and_max_batch_load_with_the_sweeps_default_layout() -> None:
    # without loader axes of their own, they measured --data loader with 0 workers (in the
    # training process) where a sweep's default is auto workers
    import argparse

    from gpubench.cli.max_batch_args import point_from_args
    from gpubench.config import loader as loader_axes
    from gpubench.tune.tuner import TuneRequest

    sweep_default = loader_axes.layouts("cpu", (None,), (None,), (None,), (True,))[0]
    assert sweep_default["loader_workers"] == loader_axes.auto_workers()
    base = TuneRequest("cnn", "tiny", "cpu", "adamw", data="loader").base_point()
    fields = ("loader_workers", "pin_memory", "prefetch", "persistent_workers")
    assert {k: getattr(base, k) for k in fields} == sweep_default
    args = argparse.Namespace(
        model="cnn", size="tiny", device="cpu", precision="fp32", optimizer="adamw", start=8,
        ceiling=64, seed=0, data="loader", options=[],
    )  # fmt: skip
    assert {k: getattr(point_from_args(args), k) for k in fields} == sweep_default
    plain = TuneRequest("cnn", "tiny", "cpu", "adamw").base_point()
    assert plain.loader_workers is None and plain.pin_memory is None
