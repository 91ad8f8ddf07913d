"""One writer per output_dir: `output_dir/.run.lock`, held with `flock` from before a run touches the directory
until it has written its last file.

The kernel releases a `flock` when its holder dies, so a killed run never leaves the directory locked (the file
stays; only the lock counts). A second writer (a second run started at once, or a resume started while the run
goes on) stops with one `error:` line naming the directory and the holder (its pid, host and start time, which the
holder writes into the file; not its command line, which may carry a token). Only the main process of a launch
takes it; the other ranks write nothing there that the main process does not coordinate. `flock` is local to a
machine on some network filesystems (NFS before v4, some FUSE mounts): two machines writing one directory there are
not stopped.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from training.errors import BadInputError

LOCK_FILE = ".run.lock"


class OutputDirInUseError(BadInputError):
    """Another process holds the output_dir's lock; the message names the directory and the holder."""


def _holder_text(path: Path) -> str:
    try:
        holder = json.loads(path.read_text())
        return f"pid {holder['pid']} on {holder['host']}, started {holder['started_at']}"
    except (OSError, ValueError, KeyError, TypeError):  # it is between truncating and writing the file
        return "a process that has not yet written who it is"


@contextmanager
def holding_output_dir(output_dir: str | Path, enabled: bool = True) -> Iterator[None]:
    """Hold `output_dir`'s lock inside the block (`enabled=False`: a process other than the main one, no lock)."""
    if not enabled:
        yield
        return
    path = Path(output_dir) / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise OutputDirInUseError(
                f"output_dir {str(output_dir)!r} is in use by another run ({_holder_text(path)}); wait for it to "
                "end, or pass another --output_dir"
            ) from None
        holder = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(holder).encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock
