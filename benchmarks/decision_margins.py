"""Where a policy departs from the one-step rule, and by how much the rule's choice wins there (issue 68's diagnosis):
the rule's own held-out episodes (episode 0 of each row, as the evaluations pair them), rendered as the build renders
its traces, read by the model teacher-forced; at every `choose` call, the model's probability of the rule's option
number and whether that number is its likeliest among the listed options', against the margin of the rule's choice
(its one-step score minus the best other option's, `acquisition.call_scores`, in the reward's units) and whether the
rule's choice is the option listed last (the teacher's); and how often the model's likeliest option is the one
whose shown gain is largest (the first among equals), a shortcut that reads one number of two.

    python -m benchmarks.decision_margins --model DIR [--split data/causal/heldout.jsonl] [--rows 64] [--out FILE]
    python -m benchmarks.decision_margins --model DIR --split CBO_ROWS/heldout.jsonl --surrogate additive

Errors that sit at small margins say the model weighs the numbers, imprecisely; errors at large margins, or a
model that picks the last option where the rule does not, say it follows a shortcut.

    python -m benchmarks.decision_margins --model DIR --working scores    # a build with a written working

With `--working scores` (a build of `starting_policy build --working scores`) each call's turn holds the rule's
working before its call, as the build's traces do, so the choice is read given the right working; and each
working is read too, token by token, teacher-forced: whether the model's likeliest next token is the working's own
at every token of it (`working_right`), which says whether the model computes the weighing it writes.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import torch

from benchmarks.episode_reading_cli import add_episode_arguments, report
from training.evaluation.spec import spec_from_recipe
from training.run_setup.prompt_datasets import load_rows
from training.tasks.causal.episode_source import CAUSAL_RECIPE
from training.tasks.causal.policies.belief_line import teacher
from training.tasks.causal.policies.play import run_policy
from training.tasks.causal.starting_policy import encode_traces, trace_messages
from training.tasks.causal.written_working import WORKINGS, WritingPolicy, scores_working


def rule_episode(row: dict, surrogate: str, working: str = "none") -> tuple[list[dict], list[dict]]:
    """The one-step rule's episode 0 of `row` as chat messages (each call's turn writing `working` before it), and
    per `choose` call what it chose from."""
    rule, states = teacher(0.0, "one_step"), []

    def recorded(env, rng):
        belief = env.belief
        name, arguments = rule(env, rng)
        if name == "choose":
            others = [o.score for o in belief.options if o is not belief.best]
            gains = [round(100 * o.gain) for o in belief.options]  # as shown
            states.append({"options": len(belief.options), "rule": arguments["option"],
                           "margin": belief.best.score - max(others) if others else None,
                           "rule_is_last": belief.best is belief.options[-1],
                           "largest_gain": 1 + int(np.argmax(gains)),
                           "working": scores_working(belief) if working == "scores" else ""})
        return name, arguments

    policy = WritingPolicy(recorded, working)
    return trace_messages(row, run_policy(policy, row, 0, surrogate), policy.workings), states


def option_token(tokenizer, k: int) -> int:
    ids = tokenizer.encode(str(k), add_special_tokens=False)
    if len(ids) != 1:
        raise ValueError(f"option {k} is {len(ids)} tokens for this tokenizer; the diagnosis reads one")
    return ids[0]


def read_states(model, tokenizer, encoded: tuple, states: list[dict]) -> list[dict]:
    """The model's reading of each `choose` call of one encoded trace (teacher-forced)."""
    ids, _, decisions = encoded
    listed = [option_token(tokenizer, k) for k in range(1, 1 + max((s["options"] for s in states), default=1))]
    positions = [p for p, d in enumerate(decisions) if d and ids[p] in listed]
    if len(positions) != len(states):
        raise ValueError(f"{len(positions)} option tokens in the trace, {len(states)} choose calls")
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0]
    out = []
    for p, state in zip(positions, states, strict=True):
        shown = listed[: state["options"]]
        probs = torch.softmax(logits[p - 1].double(), dim=-1)
        likeliest = 1 + int(torch.argmax(probs[shown]))  # the option's number
        read = {"p_rule": float(probs[ids[p]]), "agrees": likeliest == state["rule"],
                "picks_last": likeliest == state["options"], "picks_largest_gain": likeliest == state["largest_gain"]}
        if state["working"]:
            read["working_right"] = _working_right(tokenizer, ids, logits, p, state["working"])
        out.append({**state, **read})
    return out


def _working_right(tokenizer, ids: list[int], logits: torch.Tensor, before: int, working: str) -> bool:
    """Whether the model's likeliest next token is the working's own at each of its tokens (the last copy of the
    working's tokens before position `before`)."""
    written = tokenizer.encode(working, add_special_tokens=False)
    starts = [i for i in range(before - len(written), -1, -1) if ids[i:i + len(written)] == written]
    if not starts:
        raise ValueError(f"the working {working!r} is not in the trace before its call")
    at = range(starts[0], starts[0] + len(written))
    return all(int(torch.argmax(logits[i - 1])) == ids[i] for i in at)


def summary(read: list[dict]) -> dict:
    """Agreement overall, by quartile of the margin, and by whether the rule's choice is the last option; and how
    often the rule's choice is the largest shown gain (the shortcut's own agreement with the rule)."""
    choices = [r for r in read if r["margin"] is not None]  # two options or more
    margins = np.array([r["margin"] for r in choices])
    edges = np.quantile(margins, [0, 0.25, 0.5, 0.75, 1.0])
    bins = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        part = [r for r, m in zip(choices, margins) if lo <= m <= hi]
        bins.append({"margin": [float(lo), float(hi)], "decisions": len(part), **_shares(part)})
    written = [r["working_right"] for r in choices if "working_right" in r]
    working = {"working_right": float(np.mean(written))} if written else {}
    return {"decisions": len(choices), **_shares(choices), **working, "by_margin": bins,
            "shortcut_agrees": float(np.mean([r["rule"] == r["largest_gain"] for r in choices])),
            "rule_is_last": {"decisions": sum(r["rule_is_last"] for r in choices),
                             **_shares([r for r in choices if r["rule_is_last"]])},
            "rule_is_not_last": {"decisions": sum(not r["rule_is_last"] for r in choices),
                                 **_shares([r for r in choices if not r["rule_is_last"]])}}


def _shares(part: list[dict]) -> dict:
    keys = ("agrees", "p_rule", "picks_last", "picks_largest_gain")
    return {key: float(np.mean([r[key] for r in part])) if part else None for key in keys}


def main(argv: list[str] | None = None) -> int:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_episode_arguments(parser, rows=64)
    parser.add_argument("--working", default="none", choices=WORKINGS,
                        help="the rule's working written before each call, as the build of that --working wrote it")
    args = parser.parse_args(argv)
    spec = spec_from_recipe(str(CAUSAL_RECIPE), build_model=False)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
    read = []
    for row in load_rows(args.split)[: args.rows]:
        messages, states = rule_episode(row, args.surrogate, args.working)
        read += read_states(model, tokenizer, encode_traces(tokenizer, [messages], spec.template_kwargs)[0], states)
    result = {"model": args.model, "split": args.split, "rows": args.rows, **summary(read)}
    report(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
