"""Importing the ecosystem libraries (torchvision, timm, transformers), and the one-line error
that says what is installed and the one command that fixes it when one does not import.

torchvision is built against one torch release and one build of it (the default build from
PyPI, or the +cpu, +cuXXX, +rocmX.Y builds of PyTorch's own indexes). Beside another torch it
fails at import with an error of its C++ operators ("operator torchvision::nms does not exist")
that names neither, and timm and transformers (which import torchvision when it is installed)
then fail with messages of their own. The fix is a torchvision from the index the installed
torch came from, with torch pinned to the installed release so that pip cannot replace it.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import re
from types import ModuleType

import torch

# A torch build label (the part of its version after "+") that names one of PyTorch's indexes.
_INDEXED_LABEL = re.compile(r"cpu|cu\d+|rocm\d+(\.\d+)*|xpu")
_INDEX_URL = "https://download.pytorch.org/whl/{label}"
# A requirement on torch as package metadata writes it: "torch (==2.13.0)" or "torch==2.14.1".
_TORCH_REQUIREMENT = re.compile(r"^torch\s*\(?\s*([^;)]*?)\s*\)?\s*(;|$)")


def load(module: str, name: str) -> ModuleType:
    """Import `module` ("torchvision.models" or "timm") for model `name`. Any failure is a
    ValueError of one line: what is not installed or does not import, the installed torch and
    torchvision (the build torchvision was made for, from its metadata) and the command that
    installs the matching builds without replacing torch."""
    try:
        return importlib.import_module(module)
    except Exception as e:
        library = module.partition(".")[0]
        raise import_error(library, name, e) from e


def import_error(library: str, name: str, error: BaseException) -> ValueError:
    """The one-line error for model `name` whose `library` failed to import with `error`."""
    with_timm = library == "timm" and not _installed("timm")
    broken = _torchvision_failure(error if library == "torchvision" else None)
    if broken is not None:
        return torchvision_error(name, library, broken, with_timm=with_timm)
    if _missing(error, library):
        if library == "timm" and _installed("torchvision"):
            # timm asks for torch and torchvision unpinned: the installed ones satisfy it
            return ValueError(
                f"model {name!r} needs timm, which is not installed; "
                "install it with: pip install timm"
            )
        needs = (
            "torchvision, which is"
            if library == "torchvision"
            else f"{library} and torchvision, which are"
        )
        fix = install_command(torch_version(), with_timm=library == "timm")
        return ValueError(
            f"model {name!r} needs {needs} not installed; install the torchvision built for "
            f"torch {torch_version()} with: {fix}"
        )
    return ValueError(
        f"model {name!r} needs {library}, which does not import ({_first_line(error)}); "
        f"reinstall it with: pip uninstall -y {library} && pip install {library}"
    )


def torchvision_error(
    name: str, library: str, failure: BaseException, *, with_timm: bool = False
) -> ValueError:
    """The one-line error for model `name` whose `library` cannot be used because the installed
    torchvision does not import (`failure`): the installed builds and the one-line fix."""
    through = "" if library == "torchvision" else f" (imported by {library})"
    return ValueError(
        f"model {name!r} needs torchvision{through}, which does not import "
        f"({_first_line(failure)}): {installed_builds()}; install the torchvision built for "
        f"this torch with: "
        f"{install_command(torch_version(), replace=True, with_timm=with_timm)}"
    )


def blame_torchvision(name: str, library: str, error: BaseException) -> None:
    """When `library` failed with `error` while an installed torchvision does not import, raise
    the torchvision error from it (the library's own message names some other thing)."""
    failure = _torchvision_failure(None)
    if failure is not None:
        raise torchvision_error(name, library, failure) from error


def installed_builds() -> str:
    """'torch X is installed (its build), and torchvision Y is built for torch==Z (its build)',
    read from the running torch and torchvision's package metadata."""
    installed = torch_version()
    said = f"torch {installed} is installed ({_build(installed)})"
    try:
        vision = importlib.metadata.version("torchvision")
        requires = importlib.metadata.requires("torchvision") or []
    except importlib.metadata.PackageNotFoundError:
        return f"{said}, and torchvision has no package metadata (its version is unknown)"
    wanted = [m.group(1) for r in requires if (m := _TORCH_REQUIREMENT.match(r))]
    built_for = f"torch{wanted[0]}" if wanted and wanted[0] else "an unnamed torch"
    return f"{said}, and torchvision {vision} is built for {built_for} ({_build(vision)})"


def torch_version() -> str:
    """The installed torch's version as pip knows it (its package metadata): PyPI's builds
    carry no label there even where `torch.__version__` says "+cu130", and the label is what
    names the index a build came from."""
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:  # a torch run from a source tree
        return str(torch.__version__)


def install_command(torch_version: str, *, replace: bool = False, with_timm: bool = False) -> str:
    """The pip command that installs the torchvision built for `torch_version` (torch pinned to
    that release, from the index its build label names), after uninstalling the installed
    torchvision when `replace`, and then timm (from PyPI) when `with_timm`."""
    public, _, label = torch_version.partition("+")
    if not label:
        command = f"pip install torch=={public} torchvision"
    elif _INDEXED_LABEL.fullmatch(label):
        index = _INDEX_URL.format(label=label)
        command = f"pip install torch=={public} torchvision --index-url {index}"
    else:  # a build of its own (from source): pinned whole, so pip cannot replace it
        command = f"pip install torch=={torch_version} torchvision"
    if replace:
        command = f"pip uninstall -y torchvision && {command}"
    if with_timm:
        command += " && pip install timm"
    return command


def _build(version: str) -> str:
    label = version.partition("+")[2]
    return f"the +{label} build" if label else "the default build from PyPI"


def _torchvision_failure(known: BaseException | None) -> BaseException | None:
    """How an installed torchvision fails to import (`known` when already seen), or None when
    it imports or is not installed."""
    if known is not None:
        return None if _missing(known, "torchvision") else known
    try:
        importlib.import_module("torchvision")
    except ModuleNotFoundError as e:
        return None if _missing(e, "torchvision") else e
    except Exception as e:  # its C++ operators, built for another torch, do not load
        return e
    return None


def _missing(error: BaseException, library: str) -> bool:
    """Whether `error` says that `library` itself is not installed."""
    missing = error.name if isinstance(error, ModuleNotFoundError) else None
    return (missing or "").partition(".")[0] == library


def _installed(library: str) -> bool:
    """Whether `library` can be found for import (as transformers decides what to import)."""
    try:
        return importlib.util.find_spec(library) is not None
    except (ImportError, ValueError):
        return False


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0]}" if text else type(error).__name__
