from __future__ import annotations

import pytest
import torch

from gpubench.spec import Budget


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def quick_budget() -> Budget:
    """A few fixed steps: enough to exercise the harness, fast on 2 cores."""
    return Budget.fixed(steps=3, warmup_steps=1)
