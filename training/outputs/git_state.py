"""The commit a command ran at, for the records that name it (a build record, a workflow report): read at the start,
since the code that runs is the code of that moment."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def git_state(repo: Path = REPO) -> dict:
    """{"commit": HEAD or None outside a git checkout, "dirty": whether tracked files differ from it}."""
    def git(*args) -> str:
        return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=False).stdout.strip()

    return {"commit": git("rev-parse", "HEAD") or None,
            "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}
