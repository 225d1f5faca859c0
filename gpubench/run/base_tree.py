"""The base of an A/B comparison of code versions (`compare --ab BASE_REF`, run.ab): the git
checkout that holds the working tree, and BASE_REF's files exported (`git archive`) into a
temporary folder that is removed when the block ends, on an error or Ctrl-C too. An export, not
a `git worktree`, so that nothing is registered in the repository (a killed gate leaves at most
a folder under the temporary directory, never a stale worktree entry)."""

from __future__ import annotations

import contextlib
import io
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from gpubench.config.errors import ConfigError


@dataclass(frozen=True)
class Trees:
    """The two versions' folders: `head` the checkout's working tree (uncommitted changes
    included), `base` BASE_REF's files; their commits, and whether the head has changes not
    committed."""

    head: Path
    base: Path
    base_ref: str
    base_commit: str
    head_commit: str
    head_changed: bool


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)


def checkout_root(folder: Path) -> Path:
    """The top of the git checkout that holds `folder`; ConfigError naming it where it is in
    none (or git is missing)."""
    try:
        done = _git(folder, "rev-parse", "--show-toplevel")
    except FileNotFoundError:
        raise ConfigError("compare --ab needs git, and git is not on PATH") from None
    if done.returncode != 0 or not done.stdout.strip():
        raise ConfigError(
            f"compare --ab: {str(folder)!r} is not in a git checkout; allowed: run it inside the "
            "checkout whose working tree is measured against BASE_REF"
        )
    return Path(done.stdout.strip())


def commit_of(repo: Path, ref: str) -> str:
    """The full commit `ref` names in `repo`; ConfigError naming it where it names none."""
    # a ref that starts with "-" would be read by git as an option
    done = None
    if not ref.startswith("-"):
        done = _git(repo, "rev-parse", "--verify", "--quiet", ref + "^{commit}")
    if done is None or done.returncode != 0 or not done.stdout.strip():
        raise ConfigError(
            f"--ab {ref!r}: no such commit in {repo}; allowed: a branch, tag or commit of it "
            "(fetch it first where it is only on a remote)"
        )
    return done.stdout.strip()


@contextlib.contextmanager
def exported(ref: str, folder: Path | None = None) -> Iterator[Trees]:
    """The checkout holding `folder` (default: the current folder) and `ref`'s files exported
    into a new temporary folder, removed when the block ends however it ends. ConfigError
    (before anything is made) where there is no checkout or `ref` names no commit."""
    repo = checkout_root(Path.cwd() if folder is None else folder)
    base_commit = commit_of(repo, ref)
    head_commit = _git(repo, "rev-parse", "--verify", "--quiet", "HEAD").stdout.strip()
    changed = bool(_git(repo, "status", "--porcelain", "--untracked-files=no").stdout.strip())
    temp = Path(tempfile.mkdtemp(prefix="gpubench-ab-"))
    try:
        base = temp / "base"
        base.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(repo), "archive", "--format=tar", base_commit],
            capture_output=True,
            check=True,
        )
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(base, filter="data")
        yield Trees(repo, base, ref, base_commit, head_commit, changed)
    finally:
        shutil.rmtree(temp)
