"""What a split's replies ask of the policy's context: the one-step rule's held-out episodes (episode 0 of each row,
as `decision_margins` renders them) under a surrogate, per episode the options its replies list, its tokens as the
build renders them, and its completion (every turn and every reply after the prompt) against the recipe's
`max_completion_length`; the shares that do not fit the model's context or the completion limit. An episode that
does not fit is cut where it reaches the limit: its last calls are never made.

    python -m benchmarks.reply_lengths [--split data/causal/heldout.jsonl] [--surrogate exact] [--rows 64]
    python -m benchmarks.reply_lengths --split CBO_ROWS/heldout.jsonl --surrogate additive
"""

from __future__ import annotations

import argparse
import re
import sys

import numpy as np

from benchmarks.decision_margins import rule_episode
from benchmarks.episode_reading_cli import add_episode_arguments, report
from training.evaluation.episode_settings import EpisodeSettings
from training.evaluation.spec import spec_from_recipe
from training.evaluation.tool_loop import environment_tools, sampling_chat_template
from training.run_setup.prompt_datasets import load_rows
from training.tasks.causal.env import CausalEnv
from training.tasks.causal.episode_source import CAUSAL_RECIPE
from training.tasks.causal.starting_policy import STARTING_POLICY_DIR

_OPTION = re.compile(r"^\d+: .* gain -?\d+ info -?\d+", re.MULTILINE)


def episode_lengths(tokenizer, messages: list[dict], template_kwargs: dict) -> dict:
    """One rendered episode's options per reply, its tokens and its prompt's."""
    template, tools = sampling_chat_template(tokenizer), list(environment_tools(CausalEnv()).values())
    first = next(i for i, m in enumerate(messages) if m["role"] == "assistant")

    def tokens(part, **kw):
        return len(tokenizer.apply_chat_template(part, tools=tools, chat_template=template, tokenize=True,
                                                 return_dict=True, **template_kwargs, **kw)["input_ids"])

    replies = [m["content"] for m in messages if m["role"] in ("user", "tool")]
    return {"options": [len(_OPTION.findall(r)) for r in replies if _OPTION.search(r)],
            "tokens": tokens(messages), "prompt": tokens(messages[:first], add_generation_prompt=True)}


def summary(episodes: list[dict], context: int, completion: int) -> dict:
    options = [n for e in episodes for n in e["options"]]
    tokens = np.array([e["tokens"] for e in episodes])
    completions = tokens - np.array([e["prompt"] for e in episodes])
    return {"episodes": len(episodes), "options_a_reply_mean": float(np.mean(options)), "options_max": max(options),
            "tokens_p50_p90_max": [float(np.percentile(tokens, q)) for q in (50, 90, 100)],
            "completion_p50_p90_max": [float(np.percentile(completions, q)) for q in (50, 90, 100)],
            "context": context, "beyond_context": float(np.mean(tokens > context)),
            "max_completion_length": completion, "beyond_completion": float(np.mean(completions > completion))}


def main(argv: list[str] | None = None) -> int:
    from transformers import AutoConfig, AutoTokenizer

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_episode_arguments(parser, rows=64, model=str(STARTING_POLICY_DIR))
    args = parser.parse_args(argv)
    spec = spec_from_recipe(str(CAUSAL_RECIPE), build_model=False)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    episodes = [episode_lengths(tokenizer, rule_episode(row, args.surrogate)[0], spec.template_kwargs)
                for row in load_rows(args.split)[: args.rows]]
    context = AutoConfig.from_pretrained(args.model).max_position_embeddings
    completion = EpisodeSettings.from_spec(spec).max_completion_length
    result = {"split": args.split, "surrogate": args.surrogate, **summary(episodes, context, completion)}
    report(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
