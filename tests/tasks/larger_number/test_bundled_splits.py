"""The shipped task splits are exactly what their generators write, so `python -m training.tasks.<task>` is the
source of truth for `data/`."""

import filecmp

import pytest

from training.tasks.larger_number import splits as larger_number
from training.tasks.workspace import splits as workspace


@pytest.mark.parametrize("task", [larger_number, workspace], ids=["larger_number", "workspace"])
def test_generator_rewrites_the_shipped_splits_byte_for_byte(tmp_path, task):
    task.write_splits(tmp_path)
    for name in ("train.jsonl", "heldout.jsonl"):
        assert filecmp.cmp(tmp_path / name, task.DATA_DIR / name, shallow=False), name
