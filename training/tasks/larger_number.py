"""The bundled task: "Which number is larger: 37 or 52?" answered with the number alone.

A chance policy scores 0.5; the warm start gets part of the way; GRPO with a rule verifier has a clear signal.
The splits are generated once (`python -m training.tasks.larger_number`) and shipped under
`data/larger_number/`; train and held-out share no number pair.
"""

from __future__ import annotations

import argparse
import json
import random
import re
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parents[2] / "data" / "larger_number"
QUESTION = "Which number is larger: {a} or {b}? Answer with the number only."
_NUMBER = re.compile(r"-?\d+")


def make_row(a: int, b: int) -> dict:
    return {
        "prompt": [{"role": "user", "content": QUESTION.format(a=a, b=b)}],
        "answer": str(max(a, b)),
    }


def make_splits(seed: int = 0, n_train: int = 2000, n_heldout: int = 200) -> tuple[list[dict], list[dict]]:
    rng = random.Random(seed)
    pairs = [(a, b) for a in range(10, 100) for b in range(10, 100) if a != b]
    rng.shuffle(pairs)
    heldout_pairs = pairs[:n_heldout]
    blocked = {frozenset(p) for p in heldout_pairs}
    train_pairs = [p for p in pairs[n_heldout:] if frozenset(p) not in blocked][:n_train]
    return [make_row(*p) for p in train_pairs], [make_row(*p) for p in heldout_pairs]


def parse_answer(text: str) -> str | None:
    """The first integer in the completion text, or None when there is none."""
    match = _NUMBER.search(text)
    return match.group(0) if match else None


def write_splits(out_dir: Path = DATA_DIR, seed: int = 0) -> None:
    train, heldout = make_splits(seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, rows in (("train", train), ("heldout", heldout)):
        with open(out_dir / f"{name}.jsonl", "w") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Regenerate the bundled larger-number task splits.")
    parser.add_argument("--seed", type=int, default=0)
    write_splits(seed=parser.parse_args().seed)
