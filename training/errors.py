"""One base class for bad input: whatever the user can fix before training starts.

`training.train.cli` prints `error: <message>` for a `BadInputError` and exits 2; any other exception is a bug or a
failure during training and keeps its traceback. The message names the key, flag, file, row or path to fix.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager


class BadInputError(ValueError):
    """Input the user can fix (a recipe key, a flag, a data row, a path); the message says which."""


class MissingPathError(BadInputError, FileNotFoundError):
    """A file or directory the input names does not exist or lacks what it needs."""


@contextmanager
def bad_input_exits() -> Iterator[None]:
    """Around a command-line entry point: a `BadInputError` prints one `error: <message>` line and exits 2."""
    try:
        yield
    except BadInputError as err:
        _close_progress_bars()
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)


def _close_progress_bars() -> None:
    """A bad input found mid-run (a vLLM server that stopped answering) would otherwise print its line after an
    open progress bar, on the same line."""
    tqdm = sys.modules.get("tqdm")
    for bar in list(getattr(getattr(tqdm, "tqdm", None), "_instances", ())):
        bar.close()
