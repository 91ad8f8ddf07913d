"""How a policy's sampled episodes end: each episode played as the evaluation plays it (the recipe's sampling, turn
and completion limits, `training.evaluation.tool_loop.play_episodes`), and for the episodes that end before their
budget the text of the last turn, counted (`Done.`: the model chose to stop; a turn cut at its limit or with no call
reads otherwise), the calls left when it stopped, whether a call of it was refused (a refused call takes a call's
place) and the episode's length in tokens against the model's context.

    python -m benchmarks.episode_ends --model DIR --split S/cbo_rows/heldout.jsonl --surrogate additive --rows 32
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter

import numpy as np

from benchmarks.episode_reading_cli import add_episode_arguments, report
from training.evaluation.episode_settings import EpisodeSettings
from training.evaluation.spec import spec_from_recipe
from training.evaluation.tool_loop import PlayedEpisode, play_episodes
from training.run_setup.prompt_datasets import load_rows
from training.tasks.causal.env import make_causal_env
from training.tasks.causal.episode_source import CAUSAL_RECIPE
from training.tasks.causal.policy_episodes import causal_reset


def episode_end(ep: PlayedEpisode, tokenizer) -> dict:
    trace = ep.env.trace
    return {"row": ep.row, "calls": trace.used, "budget": trace.budget,
            "refused": sum(trace.invalid.values()) + sum(ep.malformed.values()),
            "tokens": len(ep.prompt_ids) + len(ep.completion_ids),
            "last_turn": tokenizer.decode(ep.turn_ids(ep.turns - 1), skip_special_tokens=True).strip()}


def summary(ends: list[dict], context: int) -> dict:
    short = [e for e in ends if e["calls"] < e["budget"]]
    return {"episodes": len(ends), "short_of_budget": len(short) / len(ends),
            "calls_left_when_short": dict(sorted(Counter(e["budget"] - e["calls"] for e in short).items())),
            "last_turn_when_short": dict(Counter(e["last_turn"] if e["last_turn"] == "Done." else "other"
                                                 for e in short)),
            "short_with_a_refused_call": sum(e["refused"] > 0 for e in short),
            "tokens_p50_p90_max": [float(np.percentile([e["tokens"] for e in ends], q)) for q in (50, 90, 100)],
            "context": context, "short_within_16_tokens_of_context": sum(e["tokens"] >= context - 16 for e in short)}


def main(argv: list[str] | None = None) -> int:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_episode_arguments(parser, rows=32, out_help="also write the summary and every episode's end (JSON) here")
    args = parser.parse_args(argv)
    settings = EpisodeSettings.from_spec(spec_from_recipe(str(CAUSAL_RECIPE), build_model=False))
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model).eval()
    rows = load_rows(args.split)[: args.rows]
    played = play_episodes(model, tokenizer, rows, make_causal_env(args.surrogate), settings, reset=causal_reset)
    ends = [episode_end(ep, tokenizer) for ep in played]
    result = {"model": args.model, "split": args.split, **summary(ends, model.config.max_position_embeddings)}
    report(result, args.out, {"ends": ends})
    return 0


if __name__ == "__main__":
    sys.exit(main())
