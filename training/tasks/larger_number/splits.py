"""The bundled task: "Which number is larger: 37 or 52? Answer with: The larger number is N."

Each row carries the `answer` and a `demonstration`: the completion a careless teacher wrote, the requested sentence
("The larger number is 52.") for half of the rows and the bare number for the other half. The supervised warm start
imitates the demonstrations, so GRPO starts from a policy that is sometimes right and follows the answer format only
sometimes; the verifiers reward a correct number and, separately, the requested format. The splits are generated
once (`python -m training.tasks.larger_number.splits`) and shipped under `data/larger_number/`; train and held-out share no
number pair.
"""

from __future__ import annotations

import argparse
import random
import re
from pathlib import Path

from training.evaluation.pairing_seeds import styles_seed
from training.run_setup.prompt_datasets import write_split_files

DATA_DIR = Path(__file__).resolve().parents[3] / "data" / "larger_number"
QUESTION = "Which number is larger: {a} or {b}? Answer with: The larger number is N."
_NUMBER = re.compile(r"-?\d+")


ANSWER_FORMAT = "The larger number is {answer}."
ANSWER_PATTERN = re.compile(r"The larger number is -?\d+\.")


def make_row(a: int, b: int, follows_format: bool) -> dict:
    answer = str(max(a, b))
    return {
        "prompt": [{"role": "user", "content": QUESTION.format(a=a, b=b)}],
        "answer": answer,
        "demonstration": ANSWER_FORMAT.format(answer=answer) if follows_format else answer,
    }


def make_splits(seed: int = 0, n_train: int = 2000, n_heldout: int = 200) -> tuple[list[dict], list[dict]]:
    rng = random.Random(seed)
    pairs = [(a, b) for a in range(10, 100) for b in range(10, 100) if a != b]
    rng.shuffle(pairs)
    heldout_pairs = pairs[:n_heldout]
    blocked = {frozenset(p) for p in heldout_pairs}
    train_pairs = [p for p in pairs[n_heldout:] if frozenset(p) not in blocked][:n_train]
    styles = random.Random(styles_seed(seed))
    rows = [make_row(a, b, follows_format=styles.random() < 0.5) for a, b in train_pairs + heldout_pairs]
    return rows[: len(train_pairs)], rows[len(train_pairs) :]


def parse_answer(text: str) -> str | None:
    """The first integer in the completion text, or None when there is none."""
    match = _NUMBER.search(text)
    return match.group(0) if match else None


def write_splits(out_dir: Path = DATA_DIR, seed: int = 0) -> None:
    train, heldout = make_splits(seed)
    write_split_files(out_dir, {"train": train, "heldout": heldout})


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Regenerate the bundled larger-number task splits.")
    parser.add_argument("--seed", type=int, default=0)
    write_splits(seed=parser.parse_args().seed)
