"""The bundled workspace tasks: post a message to a channel, or open a ticket whose priority follows a keyword.

Each row carries the user `prompt`, the `task` kind, its `goal_json` (what the goal checker in
`training.tasks.workspace.env` tests) and `reference_calls_json`: the tool calls that solve it, used for the warm-start
traces and for assisted (forced) sampling. Goals and calls are JSON strings, not nested columns, because Arrow
would merge the different tasks' keys into one struct and fill the gaps with nulls.

The splits are generated once (`python -m training.tasks.workspace.splits`) and shipped under `data/workspace/`; no
(channel, text) or (title, priority keyword) pair of the held-out split occurs in the train split.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from training.run_setup.prompt_datasets import write_split_files

DATA_DIR = Path(__file__).resolve().parents[3] / "data" / "workspace"

CHANNELS = ("general", "eng", "ops", "sales", "design")
# Small vocabularies: the held-out split is new (channel, text) and (title, keyword) pairs of parts the train split
# shows often, so a ~0.5M-parameter model can get some right; larger ones leave it at zero held-out success.
TEXTS = ("deploy done", "build green", "tests pass", "fix merged", "backup done", "all clear", "demo at noon",
         "docs updated")
TITLES = ("Login bug", "Slow search", "Broken link", "Crash on save", "Missing icon", "Export fails", "Old logo",
          "Email bounce")
# The keyword in the request decides the priority; the model has to learn the mapping.
PRIORITY_WORDS = {"urgent": "high", "blocking": "high", "minor": "low", "someday": "low", "soon": "medium"}


def post_row(channel: str, text: str) -> dict:
    call = {"name": "send_slack_message", "arguments": {"channel": channel, "text": text}}
    return {
        "prompt": [{"role": "user", "content": f"Post '{text}' to #{channel}."}],
        "task": "post_message",
        "goal_json": json.dumps({"channel": channel, "text": text}),
        "reference_calls_json": json.dumps([call]),
    }


def ticket_row(title: str, word: str) -> dict:
    priority = PRIORITY_WORDS[word]
    call = {"name": "create_ticket", "arguments": {"title": title, "body": word, "priority": priority}}
    return {
        "prompt": [{"role": "user", "content": f"Open a ticket '{title}', it is {word}."}],
        "task": "create_ticket",
        "goal_json": json.dumps({"title": title, "priority": priority}),
        "reference_calls_json": json.dumps([call]),
    }


def make_splits(seed: int = 0, heldout_fraction: float = 0.25) -> tuple[list[dict], list[dict]]:
    rng = random.Random(seed)
    posts = [(c, t) for c in CHANNELS for t in TEXTS]
    tickets = [(t, w) for t in TITLES for w in PRIORITY_WORDS]
    rng.shuffle(posts)
    rng.shuffle(tickets)
    n_post, n_ticket = int(len(posts) * heldout_fraction), int(len(tickets) * heldout_fraction)
    heldout = [post_row(*p) for p in posts[:n_post]] + [ticket_row(*t) for t in tickets[:n_ticket]]
    train = [post_row(*p) for p in posts[n_post:]] + [ticket_row(*t) for t in tickets[n_ticket:]]
    rng.shuffle(train)
    rng.shuffle(heldout)
    return train, heldout


def write_splits(out_dir: Path = DATA_DIR, seed: int = 0) -> None:
    train, heldout = make_splits(seed)
    write_split_files(out_dir, {"train": train, "heldout": heldout})


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Regenerate the bundled workspace task splits.")
    parser.add_argument("--seed", type=int, default=0)
    write_splits(seed=parser.parse_args().seed)
