"""A build's stop decisions (`starting_policy build --decisions calls_and_stops`): the decision tokens of each trace
are the calls' names and option numbers plus the first token of every assistant turn's answer (the `<tool_call>`
that opens a call, a written working's first number, the final answer's first token), all assistant tokens; the
default marks the calls alone and leaves the shipped build's traces as they were; an unknown kind is refused naming
the flag."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from training.errors import BadInputError
from training.evaluation.spec import spec_from_recipe
from training.run_setup.prompt_datasets import load_rows
from training.run_setup.warm_start import encoded_digest
from training.tasks.causal.episode_source import CAUSAL_RECIPE
from training.tasks.causal.starting_policy import (DATA_FILES, STARTING_POLICY_DIR, BuildSettings, encode_traces,
                                                   play)


@pytest.fixture(scope="module")
def encoded():
    tokenizer = AutoTokenizer.from_pretrained(STARTING_POLICY_DIR)
    kwargs = spec_from_recipe(str(CAUSAL_RECIPE), build_model=False).template_kwargs
    traces = play(load_rows(DATA_FILES[0])[:2], 2, other_share=0.3)
    return tokenizer, traces, {d: encode_traces(tokenizer, traces, kwargs, d) for d in ("calls", "calls_and_stops")}


def marked(tokenizer, item) -> list[str]:
    ids, labels, decisions = item
    assert all(label != -100 for label, d in zip(labels, decisions) if d)  # assistant tokens only
    return [tokenizer.decode([t]) for t, d in zip(ids, decisions) if d]


def test_stops_add_each_calls_opening_and_the_final_answer(encoded):
    tokenizer, traces, by = encoded
    for messages, calls, stops in zip(traces, by["calls"], by["calls_and_stops"]):
        made = sum(len(m.get("tool_calls") or []) for m in messages if m["role"] == "assistant")
        plain, with_stops = marked(tokenizer, calls), marked(tokenizer, stops)
        assert plain == [t for t in with_stops if t not in ("<tool_call>", "Done")]
        assert with_stops.count("<tool_call>") == made and with_stops[-1] == "Done"
        assert with_stops.count("Done") == 1
        assert calls[0] == stops[0] and calls[1] == stops[1]  # the same tokens and labels; only the weights differ


def test_with_a_working_the_turn_opens_at_the_workings_first_number(encoded):
    tokenizer, _, _ = encoded
    kwargs = spec_from_recipe(str(CAUSAL_RECIPE), build_model=False).template_kwargs
    traces = play(load_rows(DATA_FILES[0])[:1], 1, rule="one_step", working="scores")
    with_stops = marked(tokenizer, encode_traces(tokenizer, traces, kwargs, "calls_and_stops")[0])
    workings = [m["content"] for m in traces[0] if m["role"] == "assistant" and m.get("tool_calls")]
    openings = [t for t, after in zip(with_stops, with_stops[1:]) if after == "choose"]  # the token before a name
    assert len(openings) == len(workings) and all(w.startswith(t) for t, w in zip(openings, workings))
    assert "<tool_call>" not in with_stops and with_stops[-1] == "Done"


def test_the_default_marks_the_calls_alone(encoded):
    tokenizer, traces, by = encoded
    kwargs = spec_from_recipe(str(CAUSAL_RECIPE), build_model=False).template_kwargs
    assert encoded_digest(encode_traces(tokenizer, traces, kwargs)) == encoded_digest(by["calls"])
    assert encoded_digest(by["calls"]) != encoded_digest(by["calls_and_stops"])
    assert BuildSettings().decisions == "calls"


def test_an_unknown_kind_is_refused_naming_the_flag():
    with pytest.raises(BadInputError, match="--decisions"):
        BuildSettings(decisions="everything")
