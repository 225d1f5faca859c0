"""torchvision classification models by name (`torchvision:resnet50`), random weights, offline.

Built with `torchvision.models.get_model(name, weights=None, **options)`; the input size is the
one the model's default weights were trained at (their transforms' crop size, 224 for most,
299 for Inception v3), read from the weights' metadata, which needs no download.
"""

from __future__ import annotations

import functools
from typing import Any

from gpubench.models import adapted, library_import
from gpubench.models.workload import Workload

PREFIX = "torchvision"
DEFAULT_IMAGE_SIZE = 224  # torchvision's classification models without weights metadata


def build(arch: str, options: dict[str, Any]) -> Workload:
    """The Workload of torchvision classification model `arch`; `options` are its constructor's
    keyword arguments plus `image_size` (pixels, square) and `num_classes`."""
    name = f"{PREFIX}:{arch}"
    # a missing torchvision, or one built for another torch (a RuntimeError of its operators),
    # is a one-line error naming the installed builds and the command that matches them
    tvm = library_import.load("torchvision.models", name)
    known = tvm.list_models(module=tvm)  # the classification models only
    if arch not in known:
        raise adapted.unknown_model(arch, known, "torchvision")
    options = dict(options)
    image_size = options.pop("image_size", None)
    if image_size is not None:
        adapted.positive_int(name, "image_size", image_size)
        if "image_size" in _defaults(tvm, arch):  # ViTs: the position embeddings follow it
            options["image_size"] = image_size
    adapted.check_options(name, options, {*_defaults(tvm, arch), "image_size", "num_classes"})
    model = tvm.get_model(arch, weights=None, **options)
    size = image_size or _crop_size(tvm, arch)
    classes = options.get("num_classes", _defaults(tvm, arch).get("num_classes"))
    if not isinstance(classes, int):
        raise ValueError(f"model {name!r} does not say its number of classes; set num_classes")
    return adapted.image_classifier(name, model, (size, size), classes)


@functools.cache
def _defaults(tvm: Any, arch: str) -> dict[str, Any]:
    """The model class's constructor parameters and their defaults (a builder passes its
    **kwargs on to the class; num_classes defaults to 1000 in every classification model)."""
    found = adapted.init_parameters(lambda: tvm.get_model(arch, weights=None))
    return {k: v for k, v in found.items() if k != "weights"}


def _crop_size(tvm: Any, arch: str) -> int:
    """The crop size of the model's default weights (metadata only), else 224."""
    try:
        weights = tvm.get_model_weights(arch).DEFAULT
    except (ValueError, AttributeError, KeyError):  # a model without published weights
        return DEFAULT_IMAGE_SIZE
    crop = getattr(weights.transforms, "keywords", {}).get("crop_size", DEFAULT_IMAGE_SIZE)
    return int(crop[0] if isinstance(crop, list | tuple) else crop)
