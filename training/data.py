"""Prompt datasets: loaded from JSON lines and validated before any training starts."""

from __future__ import annotations

import json
from pathlib import Path

from datasets import Dataset

from training.errors import BadInputError


class DatasetError(BadInputError):
    """A dataset row or column we cannot train on; the message names the file, row and field."""


def _prompt_is_empty(prompt) -> bool:
    if isinstance(prompt, str):
        return not prompt.strip()
    if isinstance(prompt, list):
        return not prompt or all(not str(m.get("content") or "").strip() for m in prompt if isinstance(m, dict))
    return True


def validate_rows(rows: list[dict], source: str, required: tuple[str, ...] = ("prompt",)) -> None:
    """Raise `DatasetError` for a missing column or an empty prompt, naming `source`, the row and the field."""
    if not rows:
        raise DatasetError(f"{source}: the dataset has no rows")
    for i, row in enumerate(rows):
        for column in required:
            if column not in row:
                raise DatasetError(
                    f"{source}: row {i} has no {column!r} column (columns present: {sorted(row)}); "
                    f"every row needs {list(required)}"
                )
        if _prompt_is_empty(row["prompt"]):
            raise DatasetError(f"{source}: row {i} has an empty 'prompt'")
        if isinstance(row["prompt"], list):
            for j, message in enumerate(row["prompt"]):
                if not isinstance(message, dict) or "role" not in message or "content" not in message:
                    raise DatasetError(
                        f"{source}: row {i} 'prompt' message {j} must be a mapping with 'role' and 'content'"
                    )


def load_rows(path: str | Path) -> list[dict]:
    path = Path(path)
    if not path.exists():
        raise DatasetError(f"dataset file {str(path)!r} does not exist")
    rows = []
    with open(path) as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise DatasetError(f"{path}: line {line_no} is not valid JSON ({err.msg})") from None
    validate_rows(rows, str(path))
    return rows


def write_split_files(out_dir: str | Path, splits: dict[str, list[dict]]) -> None:
    """Write each split's rows to `out_dir/<name>.jsonl`, one JSON object per line (what `load_rows` reads)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, rows in splits.items():
        with open(out_dir / f"{name}.jsonl", "w") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")


def load_prompt_dataset(path: str | Path) -> Dataset:
    """A validated `datasets.Dataset` from a JSON-lines file whose rows carry a `prompt`."""
    return Dataset.from_list(load_rows(path))
