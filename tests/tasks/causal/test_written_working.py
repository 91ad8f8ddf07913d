"""The written working (`starting_policy build --working scores`): every imitated call's turn writes each listed
option's one-step score before the call, the largest written score is the rule's choice, the turn as the model would
write it parses to the same call, the working is learnt as labels while the decisions stay the call's tokens, and a
build that imitates the teacher refuses it."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer
from trl.chat_template_utils import add_response_schema, parse_response

from training.errors import BadInputError
from training.evaluation.spec import spec_from_recipe
from training.evaluation.tool_loop import environment_tools, sampling_chat_template
from training.run_setup.prompt_datasets import load_rows
from training.tasks.causal.env import CausalEnv
from training.tasks.causal.episode_source import CAUSAL_RECIPE
from training.tasks.causal.starting_policy import DATA_FILES, STARTING_POLICY_DIR, BuildSettings, encode_traces, play
from training.tool_use.tool_calls import install_strict_parsing


@pytest.fixture(scope="module")
def traces():
    rows = load_rows(DATA_FILES[0])[:3]
    return {working: play(rows, 1, rule="one_step", working=working) for working in ("none", "scores")}


def call_turns(messages):
    return [m for m in messages if m["role"] == "assistant" and m.get("tool_calls")]


def test_the_working_lists_every_option_and_its_largest_score_is_the_rules_choice(traces):
    decisions = 0
    for messages in traces["scores"]:
        replies = [m["content"] for m in messages if m["role"] == "tool"]
        shown = [messages[0]["content"], *replies[:-1]]  # what each call was chosen from
        for turn, reply in zip(call_turns(messages), shown, strict=True):
            listed = sum(line[:1].isdigit() and ": " in line for line in reply.split("Options:")[-1].splitlines())
            entries = [entry.split(" ") for entry in turn["content"].split(", ")]
            assert [int(k) for k, _ in entries] == list(range(1, listed + 1))
            scores = {int(k): int(s) for k, s in entries}
            chosen = turn["tool_calls"][0]["function"]["arguments"]["option"]
            assert scores[chosen] == max(scores.values())
            decisions += listed > 1
    assert decisions >= 5


def test_a_turn_written_with_its_working_parses_to_the_same_call(traces):
    tokenizer = AutoTokenizer.from_pretrained(STARTING_POLICY_DIR)
    template, kwargs = sampling_chat_template(tokenizer), spec_from_recipe(str(CAUSAL_RECIPE), build_model=False)
    tools = list(environment_tools(CausalEnv()).values())
    parser = add_response_schema(AutoTokenizer.from_pretrained(STARTING_POLICY_DIR))
    install_strict_parsing(parser)
    messages = traces["scores"][0]
    at = messages.index(call_turns(messages)[0])

    def rendered(upto, **extra):
        return tokenizer.apply_chat_template(messages[:upto], tools=tools, chat_template=template, tokenize=False,
                                             **kwargs.template_kwargs, **extra)

    prefix = rendered(at, add_generation_prompt=True)
    turn = rendered(at + 1)[len(prefix):]
    parsed = parse_response(parser, tokenizer.encode(turn, add_special_tokens=False),
                            prefix=tokenizer.encode(prefix, add_special_tokens=False), tools=tools)
    assert parsed["content"] == messages[at]["content"] != ""
    assert [c["function"] for c in parsed["tool_calls"]] == [messages[at]["tool_calls"][0]["function"]]


def test_the_working_is_learnt_as_labels_and_the_decisions_stay_the_calls_tokens(traces):
    tokenizer = AutoTokenizer.from_pretrained(STARTING_POLICY_DIR)
    kwargs = spec_from_recipe(str(CAUSAL_RECIPE), build_model=False).template_kwargs
    plain, written = (encode_traces(tokenizer, traces[w], kwargs) for w in ("none", "scores"))
    for (_, labels, decided), (_, labels_w, decided_w), messages in zip(plain, written, traces["scores"], strict=True):
        working_tokens = sum(len(tokenizer.encode(m["content"], add_special_tokens=False))
                             for m in call_turns(messages))
        assert sum(decided_w) == sum(decided) > 0
        assert sum(x != -100 for x in labels_w) - sum(x != -100 for x in labels) >= working_tokens > 0


def test_a_build_that_imitates_the_teacher_refuses_a_working():
    with pytest.raises(BadInputError, match="--working scores.*--imitated one_step"):
        BuildSettings(working="scores")
    with pytest.raises(BadInputError, match="--working: one of none, scores"):
        BuildSettings(imitated="one_step", working="sums")
