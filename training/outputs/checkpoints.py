"""Checkpoints that count only once complete, so that a run killed at any moment (or out of disk) resumes.

A checkpoint directory is written in place by the Trainer, then, once every file is on disk, a completion marker
(`checkpoint_complete.json`: the step, every file's size and sha256) is written into it atomically; only then are older
checkpoints rotated out (`save_total_limit`), so a kill at any moment leaves at least one complete checkpoint once
one was ever completed. `--resume_from_checkpoint true` (`prepare_resume`) picks the newest complete checkpoint and
moves the incomplete ones (and complete ones whose bytes changed since: corrupt) into `output_dir/incomplete/`,
saying so in one log line; nothing is deleted there.

A full disk during a save stops the run with `DiskFullError` (an `error:` line from the CLI) that names the last
complete checkpoint. Strict stops that leave the trainer in a consistent state (`SaveBeforeStopping`: a health
detector, a reward function failing under the strict flag) save a checkpoint first (`train_saving_on_stop`).

Test-only hook: with `STRICT_GRPO_TEST_KILL_IN_CHECKPOINT=STEP:N` in the environment, the process SIGKILLs itself
while writing checkpoint-STEP, right after writing half of the bytes of the N-th `torch.save` file (1:
training_args.bin, 2: optimizer.pt, 3: scheduler.pt, 4: rng_state.pth), or, when the save makes fewer than N
`torch.save` calls, after every file but before the completion marker. Never set it outside tests.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import re
import shutil
import signal
import struct
import time
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from training.outputs.atomic import DISK_FULL_ERRNOS, atomic_write_text
from training.errors import BadInputError

logger = logging.getLogger(__name__)

MARKER = "checkpoint_complete.json"
SET_ASIDE_DIR = "incomplete"
SUPERSEDED_DIR = "superseded"  # a complete checkpoint of a step saved again (a resume from an older checkpoint)
TRAINER_STATE = "trainer_state.json"
TEST_KILL_ENV = "STRICT_GRPO_TEST_KILL_IN_CHECKPOINT"
LOW_SPACE_BYTES = 64 * 2**20  # below this much free space, a failed write is taken for a full disk
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")


class DiskFullError(BadInputError):
    """The disk filled up (ENOSPC): the user must free space; the message names the last complete checkpoint."""


class CheckpointWriteError(RuntimeError):
    """A checkpoint was written damaged although no write reported an error, with disk space left."""


class IncompleteCheckpointError(BadInputError):
    """`--resume_from_checkpoint PATH` names a checkpoint that was not completely written."""


class SaveBeforeStopping(Exception):
    """Mixed into errors of strict stops raised while the trainer's state is consistent (between two optimizer
    steps, or before an update was applied): `train_saving_on_stop` saves a checkpoint before letting them through."""


# ---- which checkpoints exist, and which are complete ------------------------------------------------------------
def checkpoint_step(path: str | Path) -> int | None:
    match = _CHECKPOINT.match(Path(path).name)
    return int(match.group(1)) if match else None


def list_checkpoints(output_dir: str | Path) -> list[Path]:
    """`checkpoint-N` directories directly in `output_dir`, by step."""
    out = Path(output_dir)
    if not out.is_dir():
        return []
    found = [p for p in out.iterdir() if p.is_dir() and checkpoint_step(p) is not None]
    return sorted(found, key=checkpoint_step)


def _file_sizes(path: Path) -> dict[str, int]:
    return {
        str(f.relative_to(path)): f.stat().st_size for f in sorted(path.rglob("*")) if f.is_file() and f.name != MARKER
    }


def file_sha256(path: str | Path) -> str:
    """The sha256 hex digest of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(2**20), b""):
            digest.update(block)
    return digest.hexdigest()


def incompleteness(path: str | Path, content: bool = True) -> str | None:
    """None when `path` is a complete checkpoint, else why not: a file missing, of another size, or (`content`)
    with other bytes than when it was completed (its sha256; markers written before digests have sizes only)."""
    path = Path(path)
    marker = path / MARKER
    if not marker.is_file():
        return "no completion marker: it was being written when the run was killed or ran out of disk"
    try:
        payload = json.loads(marker.read_text())
        recorded, digests = payload["files"], payload.get("sha256", {})
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError, UnicodeDecodeError):
        return f"its {MARKER} is unreadable"
    actual = _file_sizes(path)
    for name, size in recorded.items():
        if name not in actual:
            return f"{name} is missing"
        if actual[name] != size:
            return f"{name} has {actual[name]} bytes, {size} when it was completed"
    for name, digest in digests.items() if content else ():
        if file_sha256(path / name) != digest:
            return f"{name} is corrupt: its content differs from when it was completed (sha256)"
    return None


def damaged_file(path: Path) -> str | None:
    """Why a just-written checkpoint is not whole, or None: its trainer state must parse, every torch file (a zip
    archive) must have its central directory, every safetensors file the size its header announces. A write that
    failed without an error (some writers lose ENOSPC in buffered I/O) shows up here."""
    try:
        json.loads((path / TRAINER_STATE).read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as err:
        return f"{TRAINER_STATE} does not read ({type(err).__name__})"
    for f in sorted(path.rglob("*")):
        if f.suffix in (".pt", ".pth", ".bin") and not zipfile.is_zipfile(f):
            return f"{f.relative_to(path)} is truncated (not a whole torch archive)"
        if f.suffix == ".safetensors":
            with open(f, "rb") as fh:
                head = fh.read(8)
                try:
                    header = json.loads(fh.read(struct.unpack("<Q", head)[0])) if len(head) == 8 else None
                except (json.JSONDecodeError, UnicodeDecodeError, struct.error, OverflowError, MemoryError):
                    header = None
            ends = [t["data_offsets"][1] for k, t in (header or {}).items() if k != "__metadata__"]
            if header is None or 8 + struct.unpack("<Q", head)[0] + max(ends, default=0) != f.stat().st_size:
                return f"{f.relative_to(path)} is truncated (its size differs from its header's)"
    return None


def mark_complete(path: Path, step: int) -> None:
    """Record that every file of `path` is written (atomically, after all of them)."""
    sizes = _file_sizes(path)
    payload = {
        "step": step,
        "completed_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "files": sizes,
        "sha256": {name: file_sha256(path / name) for name in sizes},
    }
    atomic_write_text(path / MARKER, json.dumps(payload, indent=1, sort_keys=True))


def complete_checkpoints(output_dir: str | Path) -> list[Path]:
    return [p for p in list_checkpoints(output_dir) if incompleteness(p) is None]


def last_complete_text(output_dir: str | Path) -> str:
    complete = complete_checkpoints(output_dir)
    return f"the last complete checkpoint is {complete[-1]}" if complete else "there is no complete checkpoint yet"


def set_aside(paths: list[Path], output_dir: str | Path, into: str = SET_ASIDE_DIR) -> list[Path]:
    """Move `paths` into `output_dir/<into>/` (never over an earlier one); returns where they went."""
    aside = Path(output_dir) / into
    aside.mkdir(exist_ok=True)
    moved = []
    for path in paths:
        dest, k = aside / path.name, 1
        while dest.exists():
            k += 1
            dest = aside / f"{path.name}.{k}"
        os.rename(path, dest)
        moved.append(dest)
    return moved


def prepare_resume(output_dir: str | Path) -> Path | None:
    """For `--resume_from_checkpoint true`: the newest complete checkpoint (None: start from scratch), after moving
    every incomplete one into `output_dir/incomplete/`. Says what it chose and moved in one log line."""
    complete, incomplete = [], []
    for path in list_checkpoints(output_dir):
        why = incompleteness(path)
        (incomplete if why else complete).append((path, why))
    moved = set_aside([p for p, _ in incomplete], output_dir) if incomplete else []
    chosen = complete[-1][0] if complete else None
    head = (
        f"Resuming from {chosen.name}, the newest complete checkpoint in {output_dir}"
        if chosen
        else f"No complete checkpoint in {output_dir}: starting from scratch"
    )
    if moved:
        aside = "; ".join(f"{p.name} ({why}) -> {dest}" for (p, why), dest in zip(incomplete, moved, strict=True))
        logger.warning("%s; set aside %d incomplete checkpoint(s): %s", head, len(moved), aside)
    else:
        logger.info("%s", head)
    return chosen


def check_resume_path(path: str | Path) -> None:
    """An explicitly named checkpoint must be complete; one without a marker (written before markers existed) is
    accepted with a warning when its trainer state reads."""
    why = incompleteness(path)
    if why is None:
        return
    if not (Path(path) / MARKER).exists():
        try:
            json.loads((Path(path) / TRAINER_STATE).read_text())
        except (OSError, json.JSONDecodeError, UnicodeDecodeError):
            pass
        else:
            logger.warning("%s has no completion marker (written by an older version?); using it as named", path)
            return
    raise IncompleteCheckpointError(
        f"resume_from_checkpoint={str(path)!r} is incomplete ({why}); pass --resume_from_checkpoint true to resume "
        "from the newest complete checkpoint"
    )


# ---- saving -------------------------------------------------------------------------------------------------------
def free_bytes(path: Path) -> int:
    while not path.exists():
        path = path.parent
    return shutil.disk_usage(path).free


def _is_disk_full(err: BaseException, where: Path) -> bool:
    seen = err
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in DISK_FULL_ERRNOS:
            return True
        if "No space left on device" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    # torch.save reports a short write without an errno ("unexpected pos ..."): judge by the space left
    return isinstance(err, (OSError, RuntimeError)) and free_bytes(where) < LOW_SPACE_BYTES


def disk_full_error(what: str, where: Path, output_dir: Path) -> DiskFullError:
    return DiskFullError(
        f"disk full (ENOSPC) while writing {what}: {free_bytes(where) / 2**20:.1f} MiB free on the filesystem of "
        f"{where}; {last_complete_text(output_dir)}. Free some space, then resume with --resume_from_checkpoint true"
    )


def _named_file(err: BaseException) -> str | None:
    seen = err
    while seen is not None:
        if isinstance(seen, OSError) and seen.filename:
            return str(seen.filename)
        seen = seen.__cause__ or seen.__context__
    return None


@contextmanager
def disk_full_named(output_dir: str | Path, what: str) -> Iterator[None]:
    """A full disk inside, however the writing library reports it (an `OSError`, safetensors' `SafetensorError`,
    torch's short write), becomes a `DiskFullError` naming the file (the error's own file name, else `what`)."""
    try:
        yield
    except DiskFullError:
        raise
    except Exception as err:
        if not _is_disk_full(err, Path(output_dir)):
            raise
        raise disk_full_error(_named_file(err) or what, Path(output_dir), Path(output_dir)) from err


def rotate(output_dir: Path, limit: int | None, protected: set[Path]) -> None:
    """Keep the newest `limit` complete checkpoints (and `protected` ones); delete older complete ones. Incomplete
    directories are left for `prepare_resume` to set aside."""
    if not limit or limit <= 0:
        return
    complete = [p for p in list_checkpoints(output_dir) if incompleteness(p, content=False) is None]
    keep = set(complete[-limit:]) | {p for p in complete if p.resolve() in protected}
    for path in complete:
        if path not in keep:
            logger.info("Deleting older checkpoint %s (save_total_limit=%d)", path, limit)
            shutil.rmtree(path)


def save_complete_checkpoint(trainer, save: Callable[[], None]) -> Path:
    """Run the Trainer's `_save_checkpoint` (`save`), then mark the checkpoint complete and rotate older ones out.

    The Trainer's own rotation is held off during `save` (it would count the newest checkpoint before it is complete
    and could delete the last complete one). A checkpoint directory of the same step left by an earlier attempt is
    moved aside first. A full disk raises `DiskFullError` after removing the partial directory.
    """
    args = trainer.args
    output_dir = Path(args.output_dir)
    step = trainer.state.global_step
    path = output_dir / f"checkpoint-{step}"
    if args.should_save and path.exists() and getattr(trainer, "_last_saved_checkpoint", None) != path:
        into = SET_ASIDE_DIR if incompleteness(path) else SUPERSEDED_DIR  # complete: resumed from an older one
        dest = set_aside([path], output_dir, into)[0]
        logger.warning("%s existed from an earlier attempt; moved it to %s before saving this step again", path, dest)
    trainer.accelerator.wait_for_everyone()
    limit = args.save_total_limit
    args.save_total_limit = None
    try:
        with _test_kill_hook(step):
            save()
    except Exception as err:
        if not _is_disk_full(err, output_dir):
            raise
        full = disk_full_error(f"{path.name}", output_dir, output_dir)
        if args.should_save and path.exists():
            shutil.rmtree(path, ignore_errors=True)
            logger.error("Removed the partial %s: the disk filled up while it was written", path)
        raise full from err
    finally:
        args.save_total_limit = limit
    trainer.accelerator.wait_for_everyone()
    if args.should_save:
        damage = damaged_file(path)
        if damage is not None:
            shutil.rmtree(path, ignore_errors=True)
            logger.error("Removed the damaged %s: %s", path, damage)
            if free_bytes(output_dir) < LOW_SPACE_BYTES:
                raise disk_full_error(f"{path.name} ({damage})", output_dir, output_dir)
            raise CheckpointWriteError(f"{path.name} was written damaged: {damage}; {last_complete_text(output_dir)}")
        try:
            mark_complete(path, step)
        except OSError as err:
            if _is_disk_full(err, output_dir):
                raise disk_full_error(f"{path.name}/{MARKER}", output_dir, output_dir) from err
            raise
        best = trainer.state.best_model_checkpoint
        rotate(output_dir, limit, {Path(best).resolve()} if best else set())
    trainer._last_saved_checkpoint = path
    trainer.accelerator.wait_for_everyone()
    return path


def save_now(trainer) -> Path:
    """Save the trainer's current state as a complete checkpoint, unless this process already saved this step."""
    path = Path(trainer.args.output_dir) / f"checkpoint-{trainer.state.global_step}"
    if getattr(trainer, "_last_saved_checkpoint", None) == path and incompleteness(path) is None:
        return path
    trainer._save_checkpoint(trainer.model, trial=None)
    return path


def train_saving_on_stop(trainer, resume_from_checkpoint: str | None):
    """`trainer.train(...)`; a `SaveBeforeStopping` error saves a checkpoint of the current state, then propagates
    (its message gains the checkpoint's path)."""
    try:
        return trainer.train(resume_from_checkpoint=resume_from_checkpoint)
    except SaveBeforeStopping as err:
        try:
            path = save_now(trainer)
        except Exception as save_err:  # the stop's own error is the one to report; say why nothing was saved
            logger.error("Could not save a checkpoint before stopping: %s: %s", type(save_err).__name__, save_err)
            err.add_note(f"No checkpoint could be saved before stopping ({type(save_err).__name__}: {save_err}).")
            raise err from None
        note = f"Checkpoint saved before stopping: {path} (step {trainer.state.global_step})."
        logger.error("Strict stop at step %d: %s. %s", trainer.state.global_step, err, note)
        err.add_note(note)
        raise


# ---- test-only kill hook -------------------------------------------------------------------------------------------
@contextmanager
def _test_kill_hook(step: int) -> Iterator[None]:
    spec = os.environ.get(TEST_KILL_ENV)
    if not spec or int(spec.split(":")[0]) != step:
        yield
        return
    import torch

    nth = int(spec.split(":")[1])
    real_save, calls = torch.save, 0

    def half_written_save(obj, f, *args, **kwargs):
        nonlocal calls
        calls += 1
        if calls < nth or not isinstance(f, (str, os.PathLike)):
            return real_save(obj, f, *args, **kwargs)
        buffer = io.BytesIO()
        real_save(obj, buffer, *args, **kwargs)
        with open(f, "wb") as out:
            out.write(buffer.getvalue()[: len(buffer.getvalue()) // 2])
        os.kill(os.getpid(), signal.SIGKILL)

    torch.save = half_written_save
    try:
        yield
    finally:
        torch.save = real_save
    os.kill(os.getpid(), signal.SIGKILL)  # fewer than N torch.save calls: die after the files, before the marker
