"""A workload for the reused-worker compile test (not part of gpubench): the tiny MLP, with
torch._dynamo's recompile limit lowered to 1 in the worker that builds it, so that a second
compilation of one forward in that worker would hit the limit and run eager."""

from __future__ import annotations

import torch._dynamo

from gpubench import models
from gpubench.models.workload import Workload


def limited() -> Workload:
    torch._dynamo.config.recompile_limit = 1
    return models.build("mlp", "tiny")


def compiles_slowly() -> Workload:
    """The tiny MLP whose first forward pass takes 0.9 s more (as a compiling first step) and
    its second 0.3 s more (what a compiled model's early steps show), then nothing more."""
    from fault_workloads import _wrap
    from rank_faults import _SlowFirst

    return _wrap(_SlowFirst([0.9, 0.3]))
