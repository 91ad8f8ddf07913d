"""benchmarks.reply_lengths: an episode's tokens are the build's rendering of it, its prompt a prefix of them, its
options per reply those the replies number; the shares beyond the context and the completion limit count the
episodes past each."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from benchmarks.decision_margins import rule_episode
from benchmarks.reply_lengths import episode_lengths, summary
from training.evaluation.spec import spec_from_recipe
from training.run_setup.prompt_datasets import load_rows
from training.tasks.causal.episode_source import CAUSAL_RECIPE
from training.tasks.causal.splits import DATA_DIR
from training.tasks.causal.starting_policy import STARTING_POLICY_DIR, encode_traces


@pytest.fixture(scope="module")
def rendered():
    kwargs = spec_from_recipe(str(CAUSAL_RECIPE), build_model=False).template_kwargs
    tokenizer = AutoTokenizer.from_pretrained(STARTING_POLICY_DIR)
    messages, states = rule_episode(load_rows(DATA_DIR / "heldout.jsonl")[0], "exact")
    return tokenizer, kwargs, messages, states


def test_an_episodes_lengths_are_the_builds_rendering(rendered):
    tokenizer, kwargs, messages, states = rendered
    lengths = episode_lengths(tokenizer, messages, kwargs)
    assert lengths["tokens"] == len(encode_traces(tokenizer, [messages], kwargs)[0][0])
    assert 0 < lengths["prompt"] < lengths["tokens"]
    assert lengths["options"][: len(states)] == [s["options"] for s in states]  # the replies each call chose from


def test_the_shares_beyond_each_limit():
    episodes = [{"options": [2, 3], "tokens": t, "prompt": 300} for t in (700, 900, 1100, 1300)]
    out = summary(episodes, context=1024, completion=900)  # completions 400 .. 1000
    assert out["beyond_context"] == 0.5 and out["beyond_completion"] == 0.25
    assert out["options_a_reply_mean"] == 2.5 and out["options_max"] == 3
    assert out["completion_p50_p90_max"][2] == 1000
