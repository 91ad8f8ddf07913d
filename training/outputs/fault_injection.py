"""Test-only faults at named points of a run's end, for the regression tests of kills and full disks there.

`STRICT_GRPO_TEST_FAULT=POINT:KIND` in the environment makes `fault_point(POINT)` fail the run. Points:

- `final_evaluation`: the final held-out evaluation is done, nothing of it recorded yet;
- `final_evaluation_recorded`: the final evaluation and the held-out history are in run_record.json, the adapter
  is not saved yet;
- `final_save`: the final adapter was just written.

Kinds: `kill` (SIGKILL; at `final_save` after cutting the adapter file to half its bytes, as a kill in the middle
of the write leaves it) and `disk_full` (raises the error safetensors raises when the disk fills while it writes).
Never set it outside tests.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

TEST_FAULT_ENV = "STRICT_GRPO_TEST_FAULT"
SAFETENSORS_DISK_FULL = (
    'Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No space left on device" })'
)


def fault_point(point: str, torn: Path | None = None) -> None:
    """Fail here when the environment asks for it (see the module docstring); `torn`: the file a kill cuts."""
    where, _, kind = os.environ.get(TEST_FAULT_ENV, "").partition(":")
    if where != point:
        return
    if kind == "kill":
        if torn is not None and torn.exists():
            data = torn.read_bytes()
            torn.write_bytes(data[: len(data) // 2])
        os.kill(os.getpid(), signal.SIGKILL)
    if kind == "disk_full":
        from safetensors import SafetensorError

        raise SafetensorError(SAFETENSORS_DISK_FULL)
    raise ValueError(f"{TEST_FAULT_ENV}={os.environ[TEST_FAULT_ENV]!r}: unknown kind {kind!r} (kill, disk_full)")
