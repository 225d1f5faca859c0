"""run.forkserver.imported_meanwhile: modules imported in a thread over a block, all of them
imported when the block ends, and an import's error raised there."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpubench.run.forkserver import imported_meanwhile


@pytest.fixture
def modules_dir(tmp_path: Path) -> Iterator[Path]:
    sys.path.insert(0, str(tmp_path))
    yield tmp_path
    sys.path.remove(str(tmp_path))
    for name in [m for m in sys.modules if m.startswith("meanwhile_")]:
        del sys.modules[name]


def test_the_imports_are_done_when_the_block_ends(modules_dir: Path) -> None:
    # the module finishes only after the block has begun its last line: unjoined, it would
    # still be importing when the block ends
    (modules_dir / "meanwhile_slow.py").write_text(
        "import time\nimport gate\ngate.entered.wait()\ntime.sleep(0.2)\nFINISHED = True\n"
    )
    gate = type(sys)("gate")
    gate.entered = threading.Event()  # type: ignore[attr-defined]
    sys.modules["gate"] = gate
    try:
        with imported_meanwhile(["meanwhile_slow"]):
            gate.entered.set()  # type: ignore[attr-defined]
        assert sys.modules["meanwhile_slow"].FINISHED
    finally:
        del sys.modules["gate"]


def test_an_import_error_is_raised_when_the_block_ends(modules_dir: Path) -> None:
    (modules_dir / "meanwhile_broken.py").write_text("raise ValueError('broken-1234')\n")
    ran = []
    with pytest.raises(ValueError, match="broken-1234"), imported_meanwhile(["meanwhile_broken"]):
        ran.append(True)
    assert ran == [True]  # the block itself ran to its end


def test_the_blocks_own_error_wins(modules_dir: Path) -> None:
    (modules_dir / "meanwhile_broken2.py").write_text("raise ValueError('import')\n")
    with pytest.raises(KeyError), imported_meanwhile(["meanwhile_broken2"]):
        raise KeyError("block")
