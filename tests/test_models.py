from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
import torch

from gpubench import models
from gpubench.harness.train import make_trainer


@pytest.mark.parametrize("name", models.MODEL_NAMES)
def test_each_model_trains_one_step_on_its_batches(name: str) -> None:
    w = models.build(name, "tiny")
    x, y = w.batch(4, "cpu", seed=1)
    x2, _ = w.batch(4, "cpu", seed=1)
    assert torch.equal(x, x2), "the same seed gives the same batch"
    out = w.model(x)
    loss = w.loss(out, y)
    assert loss.ndim == 0 and torch.isfinite(loss)
    assert w.samples(4) == 4
    if name == "transformer":
        assert w.tokens(4) == 4 * 16
        assert out.shape == (4, 16, 64)
    else:
        assert w.tokens(4) is None
        assert out.shape == (4, 10)


def test_size_presets_grow() -> None:
    counts = {d["model"] + d["size"]: d["parameters"] for d in models.describe()}
    for name in models.MODEL_NAMES:
        assert counts[name + "tiny"] < counts[name + "small"] < counts[name + "base"]


def test_transformer_attention_is_causal() -> None:
    w = models.build("transformer", "tiny")
    x, _ = w.batch(2, "cpu")
    changed = x.clone()
    changed[:, -1] = (changed[:, -1] + 1) % 64
    w.model.eval()
    with torch.no_grad():
        a, b = w.model(x), w.model(changed)
    assert torch.allclose(a[:, :-1], b[:, :-1]), "earlier positions must not see the last token"
    assert not torch.allclose(a[:, -1], b[:, -1])


def test_overrides_and_bad_names() -> None:
    w = models.build("transformer", "tiny", layers=3)
    assert len(w.model.blocks) == 3
    with pytest.raises(ValueError, match="unknown model 'vgg'"):
        models.build("vgg")
    with pytest.raises(ValueError, match="unknown size 'xl'"):
        models.build("mlp", "xl")
    with pytest.raises(ValueError, match=r"no option 'depth'; allowed: .*hidden.*num_classes"):
        models.build("mlp", "tiny", depth=3)


def test_user_model_from_module_function(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my_workloads.py").write_text(
        textwrap.dedent("""
        import torch
        from torch import nn
        from torch.nn import functional as F
        from gpubench.models import Workload

        def build(size="small"):
            width = {"tiny": 4, "small": 8}[size]
            def make_batch(b, device, seed):
                g = torch.Generator(device=device).manual_seed(seed)
                x = torch.randn(b, 5, generator=g, device=device)
                return x, (x.sum(1) > 0).long()
            net = nn.Sequential(nn.Linear(5, width), nn.ReLU(), nn.Linear(width, 2))
            return Workload("mine", net, make_batch, F.cross_entropy)

        def not_a_workload():
            return 42
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    w = models.build("my_workloads:build", "tiny")
    assert w.parameter_count() == 5 * 4 + 4 + 4 * 2 + 2
    with pytest.raises(ValueError, match="not a Workload"):
        models.build("my_workloads:not_a_workload")
    with pytest.raises(ValueError, match="cannot load user model"):
        models.build("my_workloads:missing")
    sys.modules.pop("my_workloads", None)


@pytest.mark.parametrize(("name", "optimizer"), [("mlp", "adam"), ("transformer", "adamw")])
def test_the_training_loop_learns_the_synthetic_task(name: str, optimizer: str) -> None:
    """Fresh batches every step, so a falling loss means the task is learnt, not memorised."""
    torch.manual_seed(0)
    w = models.build(name, "tiny")
    trainer = make_trainer(w, torch.device("cpu"), "fp32", optimizer, lr=3e-3)
    losses = [trainer.step(*w.batch(64, "cpu", seed=i)).item() for i in range(300)]
    first, last = sum(losses[:20]) / 20, sum(losses[-20:]) / 20
    assert last < 0.7 * first, (first, last)
