"""benchmarks.stop_reading: every turn of the rule's episode is read once, with the calls left counting down from
the budget to 0 at the final answer; the shipped starting policy stops at 0 calls left and calls at 2 or more on the
main job's rows."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from benchmarks.decision_margins import rule_episode
from benchmarks.stop_reading import opening_reads, summary
from training.evaluation.spec import spec_from_recipe
from training.run_setup.prompt_datasets import load_rows
from training.tasks.causal.episode_source import CAUSAL_RECIPE
from training.tasks.causal.splits import DATA_DIR
from training.tasks.causal.starting_policy import STARTING_POLICY_DIR, encode_traces


@pytest.fixture(scope="module")
def reads():
    kwargs = spec_from_recipe(str(CAUSAL_RECIPE), build_model=False).template_kwargs
    tokenizer = AutoTokenizer.from_pretrained(STARTING_POLICY_DIR)
    model = AutoModelForCausalLM.from_pretrained(STARTING_POLICY_DIR, dtype=torch.float32).eval()
    out = []
    for row in load_rows(DATA_DIR / "heldout.jsonl")[:3]:
        messages, _ = rule_episode(row, "exact")
        encoded = encode_traces(tokenizer, [messages], kwargs, "calls_and_stops")[0]
        out.append((row["budget"], *opening_reads(model, tokenizer, encoded, 1024)))
    return out


def test_each_turn_is_read_with_the_calls_left_counting_down(reads):
    for budget, read, beyond in reads:
        assert beyond == 0 and [left for left, _ in read] == list(range(budget, -1, -1))
        assert all(0 <= p <= 1 for _, p in read)


def test_the_shipped_policy_stops_when_no_call_is_left(reads):
    by_left = summary([r for _, read, _ in reads for r in read])
    assert by_left["0"]["stops"] == 1.0 and by_left["0"]["openings"] == 3
    assert all(by_left[str(k)]["p_stop"] < 0.05 for k in range(2, 7))
