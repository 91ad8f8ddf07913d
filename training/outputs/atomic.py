"""Writes that a kill -9 or a full disk can interrupt without leaving a half-written file or directory behind.

A file or directory is written under a temporary name beside its destination and renamed into place once complete
(a rename within one filesystem is atomic): readers see the old version or the new one, never a torn one.
Temporary names carry the writer's pid, so a leftover of a killed writer is recognised and removed by the next one.
A write that fails for lack of space raises an `OSError` that names the destination (`naming`), even where the
failing call (a buffered write, an fsync) reports none.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

logger = logging.getLogger(__name__)

TMP_MARK = ".tmp-"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temporaries(dest: Path) -> None:
    """Remove `dest`'s temporaries left by writers that no longer run (killed while writing)."""
    for tmp in dest.parent.glob(f"{dest.name}{TMP_MARK}*"):
        pid = tmp.name.rsplit(TMP_MARK, 1)[1]
        if pid.isdigit() and int(pid) != os.getpid() and not _pid_alive(int(pid)):
            logger.info("Removing %s, left half-written by a killed process (pid %s)", tmp, pid)
            if tmp.is_dir():
                shutil.rmtree(tmp, ignore_errors=True)
            else:
                tmp.unlink(missing_ok=True)


DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


@contextmanager
def naming(path: str | Path) -> Iterator[None]:
    """An `OSError` of a full disk raised inside names `path` (a write or fsync reports no file name)."""
    try:
        yield
    except OSError as err:
        if err.errno not in DISK_FULL_ERRNOS or err.filename:
            raise
        raise OSError(err.errno, err.strerror, str(path)) from err


def temporary_name(dest: Path) -> Path:
    return dest.with_name(f"{dest.name}{TMP_MARK}{os.getpid()}")


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file and a rename; killed writers' temporaries of `path` go first."""
    path = Path(path)
    remove_stale_temporaries(path)
    tmp = temporary_name(path)
    try:
        with naming(path), open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


@contextmanager
def atomic_directory(dest: str | Path) -> Iterator[Path]:
    """Yield a temporary directory to fill; on success it becomes `dest` by one rename.

    On an exception the temporary directory is removed. When another process completed `dest` meanwhile, its copy is
    kept and ours discarded. A `dest` that exists without having been completed this way (an older, in-place
    writer's leftover) must be moved out of the way by the caller first.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(dest)
    tmp = temporary_name(dest)
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        os.rename(tmp, dest)
    except OSError:
        if not dest.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        shutil.rmtree(tmp, ignore_errors=True)  # another process finished the same directory first: keep theirs
