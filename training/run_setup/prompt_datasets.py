"""Prompt datasets: loaded from JSON lines and validated before any training starts."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow
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
        if "prompt" not in required:
            continue
        if _prompt_is_empty(row["prompt"]):
            raise DatasetError(f"{source}: row {i} has an empty 'prompt'")
        if isinstance(row["prompt"], list):
            for j, message in enumerate(row["prompt"]):
                if not isinstance(message, dict) or "role" not in message or "content" not in message:
                    raise DatasetError(
                        f"{source}: row {i} 'prompt' message {j} must be a mapping with 'role' and 'content'"
                    )


def load_rows(path: str | Path, required: tuple[str, ...] = ("prompt",)) -> list[dict]:
    """The rows of a JSON-lines file (UTF-8, one JSON object per line; blank lines skipped), validated: every row
    has the `required` columns (a `prompt`, non-empty, unless the caller never reads one)."""
    path = Path(path)
    if not path.exists():
        raise DatasetError(f"dataset file {str(path)!r} does not exist")
    if not path.is_file():
        raise DatasetError(f"dataset file {str(path)!r} is not a file")
    rows = []
    with open(path, "rb") as f:
        for line_no, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise DatasetError(
                    f"{path}: line {line_no} is not valid UTF-8 (byte {err.start}: {raw[err.start:err.start + 1]!r}); "
                    "save the file as UTF-8"
                ) from None
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise DatasetError(f"{path}: line {line_no} is not valid JSON ({err.msg})") from None
            if not isinstance(row, dict):
                kind = type(row).__name__
                raise DatasetError(f"{path}: line {line_no} is a JSON {kind}, not an object with a 'prompt'")
            rows.append(row)
    validate_rows(rows, str(path), required)
    return rows


def _content_bytes(prompt) -> int:
    if isinstance(prompt, str):
        return len(prompt.encode("utf-8"))
    return sum(len(str(m.get("content") or "").encode("utf-8")) for m in prompt)


def prompt_token_count(row: dict, tokenizer, template_kwargs: dict) -> int:
    """Tokens of a row's prompt as the sampler renders it (chat template with the generation prompt)."""
    if isinstance(row["prompt"], str):
        return len(tokenizer(row["prompt"], add_special_tokens=False)["input_ids"])
    ids = tokenizer.apply_chat_template(
        row["prompt"], add_generation_prompt=True, tokenize=True, return_dict=False, **template_kwargs
    )
    return len(ids)


def check_prompt_lengths(
    rows: list[dict], source: str, tokenizer, template_kwargs: dict, context: int, max_completion_length: int
) -> None:
    """Refuse a prompt that, with `max_completion_length` completion tokens, would not fit the model's `context`
    (a 50,000-character prompt is otherwise accepted and the run killed for memory minutes later)."""
    limit = context - max_completion_length
    if limit < 1:
        raise DatasetError(
            f"max_completion_length={max_completion_length} leaves no room for a prompt in the model's context of "
            f"{context} tokens"
        )
    # A token covers at least one byte of content (byte-level BPE, byte fallback), and a chat template adds far fewer
    # than limit/2 tokens: only prompts with more than limit/2 bytes of content need tokenizing (and the first row).
    for i, row in enumerate(rows):
        if i and _content_bytes(row["prompt"]) <= limit // 2:
            continue
        count = prompt_token_count(row, tokenizer, template_kwargs)
        if count > limit:
            raise DatasetError(
                f"{source}: row {i}: the prompt is {count} tokens; with max_completion_length={max_completion_length} "
                f"it does not fit the model's context of {context} tokens (at most {limit} prompt tokens)"
            )


def write_split_files(out_dir: str | Path, splits: dict[str, list[dict]]) -> None:
    """Write each split's rows to `out_dir/<name>.jsonl`, one JSON object per line (what `load_rows` reads)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, rows in splits.items():
        with open(out_dir / f"{name}.jsonl", "w") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")


def _kind(value) -> str:
    return "number" if isinstance(value, (int, float)) and not isinstance(value, bool) else type(value).__name__


def mixed_column(rows: list[dict]) -> str | None:
    """'column 'c': row i is a <kind>, row j a <kind>' for the first column whose rows hold values of different JSON
    types (nulls aside), or None."""
    first: dict[str, tuple[int, str]] = {}
    for i, row in enumerate(rows):
        for column, value in row.items():
            if value is None:
                continue
            j, kind = first.setdefault(column, (i, _kind(value)))
            if _kind(value) != kind:
                return f"column {column!r}: row {j} holds a {kind}, row {i} a {_kind(value)}"
    return None


def load_prompt_dataset(path: str | Path) -> Dataset:
    """A validated `datasets.Dataset` from a JSON-lines file whose rows carry a `prompt`."""
    return prompt_dataset(load_rows(path), path)


def prompt_dataset(rows: list[dict], path: str | Path) -> Dataset:
    """A validated `datasets.Dataset` of rows that carry a `prompt` (read from `path`, or kept there)."""
    validate_rows(rows, str(path), ("prompt",))
    try:
        return Dataset.from_list(rows)
    except (pyarrow.ArrowInvalid, pyarrow.ArrowTypeError) as err:  # one column, several types: Arrow has one per column
        mixed = mixed_column(rows)
        raise DatasetError(f"{path}: {mixed or err}; every row must give a column the same type") from None
