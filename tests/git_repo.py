"""git in a repository a test makes (the A/B gate's tests): commits without a configured user."""

from __future__ import annotations

import subprocess
from pathlib import Path


def git(repo: Path, *args: str) -> None:
    """`git -C repo ARGS`, with a user name and email for commits; CalledProcessError where it
    fails."""
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo), *args],
        check=True,
        capture_output=True,
    )
