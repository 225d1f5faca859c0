"""timm models by name (`timm:vit_small_patch16_224`), random weights, offline.

Built with `timm.create_model(name, pretrained=False, **options)`; the input size is the one in
the model's pretrained configuration (`timm.data.resolve_model_data_config`), the class count
the model's `num_classes`.
"""

from __future__ import annotations

import functools
from typing import Any

from gpubench.models import adapted, library_import
from gpubench.models.workload import Workload

PREFIX = "timm"


def _library(name: str) -> Any:
    # timm imports torchvision: a missing one, or one built for another torch, is a one-line
    # error naming the installed builds and the command that matches them
    timm = library_import.load("timm", name)
    library_import.load("timm.data", name)
    return timm


def build(arch: str, options: dict[str, Any]) -> Workload:
    """The Workload of timm model `arch` (a registered architecture; hub sources are refused:
    nothing is downloaded). `options` are the model class's constructor arguments plus
    `image_size` (pixels, square; passed on as `img_size` where the model takes it)."""
    name = f"{PREFIX}:{arch}"
    timm = _library(name)
    if not timm.is_model(arch) or ":" in arch:
        raise adapted.unknown_model(arch, timm.list_models(), "timm")
    options = dict(options)
    image_size = options.pop("image_size", None)
    adapted.check_options(name, options, {*_parameters(timm, arch), "image_size"})
    if image_size is not None:
        adapted.positive_int(name, "image_size", image_size)
        if "img_size" in _parameters(timm, arch):  # ViTs: the position embeddings follow it
            options["img_size"] = image_size
    model = timm.create_model(arch, pretrained=False, **options)
    if image_size is None:
        _, h, w = timm.data.resolve_model_data_config(model)["input_size"]
    else:
        h = w = image_size
    return adapted.image_classifier(name, model, (int(h), int(w)), int(model.num_classes))


@functools.cache
def _parameters(timm: Any, arch: str) -> tuple[str, ...]:
    """The model class's constructor parameters (create_model passes its **kwargs on to it)."""
    return tuple(adapted.init_parameters(lambda: timm.create_model(arch, pretrained=False)))
