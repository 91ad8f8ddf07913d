"""The command line the causal episode readings share (`decision_margins`, `episode_ends`, `stop_reading`,
`reply_lengths`): which model, which held-out rows under which surrogate, and where the summary goes."""

from __future__ import annotations

import argparse
import json


def add_episode_arguments(parser: argparse.ArgumentParser, rows: int, model: str | None = None,
                          out_help: str = "also write the summary (JSON) here") -> None:
    """--model (required unless `model` is its default), --split, --surrogate, --rows, --out."""
    if model is None:
        parser.add_argument("--model", required=True, help="a causal policy's directory")
    else:
        parser.add_argument("--model", default=model, help="a causal policy's directory (its tokenizer and context)")
    parser.add_argument("--split", default="data/causal/heldout.jsonl")
    parser.add_argument("--surrogate", default="exact")
    parser.add_argument("--rows", type=int, default=rows)
    parser.add_argument("--out", help=out_help)


def report(result: dict, out: str | None, written: dict | None = None) -> None:
    """Print the summary; with `out` write it there too (with `written` added)."""
    print(json.dumps(result, indent=2))
    if out:
        with open(out, "w") as f:
            json.dump({**result, **(written or {})}, f, indent=2)
