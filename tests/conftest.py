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


@pytest.fixture(autouse=True, scope="session")
def _matmul_peak_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Calibrated matmul peaks go to a cache of the test session's own, not the user's."""
    import os

    os.environ["GPUBENCH_CACHE_DIR"] = str(tmp_path_factory.mktemp("gpubench-cache"))
