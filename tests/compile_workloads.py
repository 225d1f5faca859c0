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
