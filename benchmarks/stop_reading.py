"""Whether a policy reads the calls left before it stops: the one-step rule's held-out episodes (episode 0 of each
row, as `decision_margins` renders them), read by the model teacher-forced; at the opening of every assistant turn
(the `<tool_call>` of a call or the final answer's first token), the model's probability of the final answer, by the
calls the reply above it says are left. A reader of the replies gives the final answer near 1 at 0 calls left and
near 0 elsewhere; a policy that stops at 1 call left ends that share of its episodes a call short.

    python -m benchmarks.stop_reading --model DIR [--split data/causal/heldout.jsonl] [--rows 64] [--out FILE]
    python -m benchmarks.stop_reading --model DIR --split CBO_ROWS/heldout.jsonl --surrogate additive

Openings past the model's context are not read (counted in `beyond_context`).
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict

import numpy as np
import torch

from benchmarks.decision_margins import rule_episode
from benchmarks.episode_reading_cli import add_episode_arguments, report
from training.evaluation.spec import spec_from_recipe
from training.run_setup.prompt_datasets import load_rows
from training.run_setup.warm_start_tools import FINAL_ANSWER
from training.tasks.causal.episode_source import CAUSAL_RECIPE
from training.tasks.causal.starting_policy import encode_traces


def opening_reads(model, tokenizer, encoded: tuple, context: int) -> tuple[list[tuple[int, float]], int]:
    """(calls left, P(final answer)) at each assistant turn's opening of one encoded trace, and how many openings lie
    past `context`."""
    ids, _, decisions = encoded
    call, answer = tokenizer.convert_tokens_to_ids("<tool_call>"), tokenizer.encode(FINAL_ANSWER)[0]
    openings = [p for p, d in enumerate(decisions) if d and ids[p] in (call, answer)]
    if not openings or ids[openings[-1]] != answer:
        raise ValueError("the trace does not end with the final answer at an assistant turn's opening")
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids[:context]])).logits[0]
    stop = torch.softmax(logits.double(), dim=-1)[:, answer]
    read = [(len(openings) - 1 - j, float(stop[p - 1])) for j, p in enumerate(openings) if p <= context]
    return read, len(openings) - len(read)


def summary(reads: list[tuple[int, float]]) -> dict:
    by_left = defaultdict(list)
    for left, p in reads:
        by_left[left].append(p)
    return {str(left): {"openings": len(ps), "p_stop": float(np.mean(ps)), "stops": float(np.mean(np.array(ps) > 0.5))}
            for left, ps in sorted(by_left.items())}


def main(argv: list[str] | None = None) -> int:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_episode_arguments(parser, rows=64)
    args = parser.parse_args(argv)
    kwargs = spec_from_recipe(str(CAUSAL_RECIPE), build_model=False).template_kwargs
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
    reads, beyond = [], 0
    for row in load_rows(args.split)[: args.rows]:
        messages, _ = rule_episode(row, args.surrogate)
        encoded = encode_traces(tokenizer, [messages], kwargs, "calls_and_stops")[0]
        read, past = opening_reads(model, tokenizer, encoded, model.config.max_position_embeddings)
        reads, beyond = reads + read, beyond + past
    result = {"model": args.model, "split": args.split, "rows": args.rows, "beyond_context": beyond,
              "by_calls_left": summary(reads)}
    report(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
