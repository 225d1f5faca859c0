"""What the ecosystem adapters share: a module that returns plain logits, an image-classifier
Workload at a model's own input size, and the option checks."""

from __future__ import annotations

import difflib
import functools
import inspect
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from gpubench.models.workload import Workload, image_classification


class Logits(nn.Module):
    """Wraps a library model so that `forward` returns a logits tensor: Hugging Face outputs
    carry `.logits`; torchvision's Inception and GoogLeNet return (logits, aux) in training."""

    def __init__(self, inner: nn.Module, **call_kwargs: Any) -> None:
        super().__init__()
        self.inner = inner
        self.call_kwargs = call_kwargs

    def forward(self, x: Tensor) -> Tensor:
        out = self.inner(x, **self.call_kwargs)
        if isinstance(out, Tensor):
            return out
        logits = getattr(out, "logits", None)
        if isinstance(logits, Tensor):
            return logits
        if isinstance(out, tuple) and out and isinstance(out[0], Tensor):
            return out[0]
        raise TypeError(f"{type(self.inner).__name__} returned {type(out).__name__}, not logits")


def unknown_model(name: str, known: Iterable[str], library: str) -> ValueError:
    """The one-line error for a name the library does not have, with its nearest names."""
    near = difflib.get_close_matches(name, list(known), n=5, cutoff=0.5)
    hint = f"; nearest: {', '.join(near)}" if near else ""
    return ValueError(f"{library} has no model {name!r}{hint}")


def check_options(name: str, options: dict[str, Any], allowed: Iterable[str]) -> None:
    """Raise ValueError naming the allowed options when `options` has one the model lacks."""
    allowed = sorted(set(allowed))
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(
            f"model {name!r} has no option {', '.join(map(repr, unknown))}; "
            f"allowed: {', '.join(allowed)}"
        )


def init_parameters(make: Callable[[], nn.Module]) -> dict[str, Any]:
    """The keyword parameters the constructor of the class `make()` builds takes (what a model
    option may set), with their defaults (inspect.Parameter.empty where there is none). The
    model is made on the meta device: only its class is wanted, nothing is allocated."""
    with torch.device("meta"):
        cls = type(make())
    params = inspect.signature(cls.__init__).parameters.values()  # type: ignore[misc]
    keep = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return {p.name: p.default for p in params if p.name != "self" and p.kind in keep}


def positive_int(name: str, key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"model {name!r}: invalid {key} {value!r}; allowed: a whole number >= 1")
    return value


def image_classifier(
    name: str, model: nn.Module, image_size: tuple[int, int], classes: int
) -> Workload:
    """A Workload that trains `model` on random 3 x H x W images with cross-entropy over
    `classes`. Labels come from a fixed random teacher on a 4 x 4 pooled image, as for the
    reference CNN, so the task is learnable. Analytic FLOPs are unknown (None): the counted
    FLOPs of the row still measure them."""
    pooled = functools.partial(F.adaptive_avg_pool2d, output_size=4)
    return image_classification(name, Logits(model), (3, *image_size), classes, None, pooled)
