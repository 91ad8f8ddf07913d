"""`benchmarks/decision_margins.py` (issue 68's diagnosis) reads the right tokens: on the one-step rule's own
episodes, its states are the rule's `choose` calls with the rule's choice winning by a margin >= 0, and the shipped
starting policy, which copies the teacher (the last option), is read as picking the last option where it does."""

from __future__ import annotations

import json

import torch

from benchmarks.decision_margins import read_states, rule_episode, summary
from training.evaluation.spec import spec_from_recipe
from training.run_setup.prompt_datasets import load_rows
from training.tasks.causal.episode_source import CAUSAL_RECIPE
from training.tasks.causal.starting_policy import DATA_FILES, STARTING_POLICY_DIR, encode_traces


def test_the_states_are_the_rules_choose_calls_and_the_shipped_policy_reads_as_the_teachers_copy():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(STARTING_POLICY_DIR)
    model = AutoModelForCausalLM.from_pretrained(STARTING_POLICY_DIR, dtype=torch.float32).eval()
    template_kwargs = spec_from_recipe(str(CAUSAL_RECIPE), build_model=False).template_kwargs
    read = []
    for row in load_rows(DATA_FILES[1])[:4]:
        messages, states = rule_episode(row, "exact")
        calls = [m["tool_calls"][0]["function"] for m in messages if m["role"] == "assistant" and m.get("tool_calls")]
        assert [c["arguments"]["option"] for c in calls if c["name"] == "choose"] == [s["rule"] for s in states]
        assert all(s["margin"] is None or s["margin"] >= 0 for s in states)
        assert all(s["margin"] is None for s in states if s["options"] == 1)
        read += read_states(model, tokenizer, encode_traces(tokenizer, [messages], template_kwargs)[0], states)
    result = summary(read)
    assert result["decisions"] >= 8
    assert result["picks_last"] >= 0.9  # the teacher's copy (its acceptance: 0.99 of greedy calls)
    assert result["rule_is_last"]["agrees"] >= 0.9 and result["rule_is_not_last"]["agrees"] <= 0.1
    json.dumps(result)  # what --out writes


class Oracle:
    """A model whose likeliest next token is always the trace's own (`ids`): reads every working as right."""

    def __init__(self, ids: list[int], vocabulary: int):
        self.ids, self.vocabulary = ids, vocabulary

    def __call__(self, input_ids):
        logits = torch.zeros(1, len(self.ids), self.vocabulary)
        logits[0, torch.arange(len(self.ids) - 1), torch.tensor(self.ids[1:])] = 10.0
        return type("Out", (), {"logits": logits})()


def test_with_the_working_each_call_reads_it_and_only_a_model_that_writes_it_reads_as_right():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(STARTING_POLICY_DIR)
    shipped = AutoModelForCausalLM.from_pretrained(STARTING_POLICY_DIR, dtype=torch.float32).eval()
    template_kwargs = spec_from_recipe(str(CAUSAL_RECIPE), build_model=False).template_kwargs
    read = {"shipped": [], "oracle": []}
    for row in load_rows(DATA_FILES[1])[:3]:
        messages, states = rule_episode(row, "exact", "scores")
        texts = [m["content"] for m in messages if m["role"] == "assistant" and m.get("tool_calls")]
        assert [s["working"] for s in states] == [t for t in texts if t]  # a choose call's turn: its working
        encoded = encode_traces(tokenizer, [messages], template_kwargs)[0]
        read["shipped"] += read_states(shipped, tokenizer, encoded, states)
        read["oracle"] += read_states(Oracle(encoded[0], len(tokenizer)), tokenizer, encoded, states)
    assert summary(read["oracle"])["working_right"] == 1.0 and summary(read["oracle"])["agrees"] == 1.0
    assert summary(read["shipped"])["working_right"] == 0.0  # the teacher's copy never learnt to write one
