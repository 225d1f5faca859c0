"""A model's repeated blocks: the units activation checkpointing recomputes (issue 25).

A block list is a ModuleList or Sequential whose elements are all of one class that has layers
of its own: the reference Transformer's `blocks`, the CNN's residual `layers`, a Hugging Face
model's decoder layers (`transformer.h`, `model.layers`), timm's and torchvision's ViT blocks
and ResNet stages (`layer1`..`layer4`). A list of single layers (the MLP's Linear layers) is
not one: checkpointing a lone layer recomputes it and saves nothing, since its input is
held anyway as the previous layer's output. Lists nested inside a block are the block's own.
"""

from __future__ import annotations

from torch import nn


def repeated_blocks(model: nn.Module) -> list[nn.Module]:
    """Every element of every block list of `model`, outermost lists first, in module order;
    [] when it has none. Wrappers (DDP's `module`, the adapters' `inner`) are looked through."""
    out: list[nn.Module] = []
    for child in model.children():
        if _is_block_list(child):
            out.extend(child.children())
        else:
            out.extend(repeated_blocks(child))
    return out


def _is_block_list(module: nn.Module) -> bool:
    if not isinstance(module, nn.ModuleList | nn.Sequential):
        return False
    elements = list(module.children())
    kinds = {type(m) for m in elements}
    # a block has layers of its own (a lone Linear or an activation is a layer, not a block)
    return len(kinds) == 1 and all(any(True for _ in m.children()) for m in elements)


def unsupported_reason(model: nn.Module, name: str) -> str | None:
    """Why `model` (named `name`) cannot checkpoint its blocks, or None."""
    if repeated_blocks(model):
        return None
    return (
        f"checkpoint=blocks recomputes a model's repeated blocks; {name} has none (no "
        "ModuleList or Sequential of one block class with layers of its own)"
    )
