"""Malformed tool calls: each kind returns an error message to the model and is counted; the run goes on."""

from collections import Counter

import pytest

from training.evaluation.tool_loop import environment_tools
from training.run_setup.flags import read_flags
from training.tasks.workspace.env import WorkspaceEnv
from training.tool_use.tool_calls import (
    INVALID_TOOL_CALL,
    EpisodeTools,
    ToolCallError,
    check_tool_calls,
    malformed_metric,
)

KNOWN = sorted(environment_tools(WorkspaceEnv()))


def call(name, arguments):
    return {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
        "name": name, "arguments": arguments}}]}


def test_check_tool_calls_rewrites_each_malformed_kind():
    bad_json = check_tool_calls(None, '<tool_call>\n{"name": "x", \n</tool_call>', KNOWN)
    unknown = check_tool_calls(call("slack_send_message", {}), "", KNOWN)
    not_object = check_tool_calls(call("list_channels", "abc"), "", KNOWN)
    for message, kind in ((bad_json, "bad_json"), (unknown, "unknown_tool"), (not_object, "bad_arguments")):
        function = message["tool_calls"][0]["function"]
        assert function["name"] == INVALID_TOOL_CALL and function["arguments"]["kind"] == kind
    assert "did you mean 'send_slack_message'" in unknown["tool_calls"][0]["function"]["arguments"]["reason"]
    good = call("list_channels", {})
    assert check_tool_calls(good, "", KNOWN) == good
    assert check_tool_calls({"role": "assistant", "content": "Done."}, "Done.", KNOWN) is None


def test_episode_tools_check_schema_and_budget():
    env = WorkspaceEnv()
    env.reset(task="post_message", goal_json='{"channel": "eng", "text": "x"}')
    counts = Counter()
    tools = EpisodeTools(environment_tools(env), counts, max_calls=2).as_tool_dict()
    with pytest.raises(ToolCallError, match=r"argument 'priority' must be one of \['low', 'medium', 'high'\]"):
        tools["create_ticket"](title="t", body="b", priority="critical")
    assert tools["send_slack_message"](channel="eng", text="x") == "sent to #eng"
    with pytest.raises(ToolCallError, match="too_many_turns"):
        tools["list_channels"]()
    assert counts == Counter(bad_arguments=1, too_many_turns=1)
    assert env.state.tickets == []  # a refused call does not act


@pytest.fixture
def scripted(make_env_trainer):
    """A trainer whose 'policy' writes the same scripted turn every time; TRL's real tool loop does the rest."""

    def run(text, **overrides):
        # the scripted "policy" samples nothing, so there are no sample-time log-probs to record
        trainer = make_env_trainer(flags=read_flags({"PPO_RECORD_AT_SAMPLE": "0"}), **overrides)
        ids = trainer.processing_class(text + "<|im_end|>", add_special_tokens=False)["input_ids"]
        trainer._generate_single_turn = lambda prompt_ids, *a, **k: ([list(ids) for _ in prompt_ids], None)
        trainer.model.train()
        batch = [trainer.train_dataset[i] for i in (0, 0, 1, 1)]
        trainer._generate_and_score_completions(batch)
        completions = list(trainer._logs["completion"])[-len(batch):]
        return trainer, completions

    return run


CASES = {
    "bad_json": ('<tool_call>\n{"name": "send_slack_message", "arguments": {"channel": "eng"\n</tool_call>',
                 "not valid JSON"),
    "unknown_tool": ('<tool_call>\n{"name": "slack_send_message", "arguments": {"channel": "eng", "text": "hi"}}'
                     "\n</tool_call>", "unknown tool 'slack_send_message'"),
    "bad_arguments": ('<tool_call>\n{"name": "create_ticket", "arguments": {"title": "t", "priority": "critical"}}'
                      "\n</tool_call>", "missing argument 'body'"),
}


@pytest.mark.parametrize("kind", sorted(CASES))
def test_each_malformed_kind_gets_an_error_response_and_a_count(scripted, kind):
    text, reason = CASES[kind]
    trainer, completions = scripted(text, max_completion_length=160, max_tool_calling_iterations=1)
    for completion in completions:
        tool_messages = [m for m in completion if m["role"] == "tool"]
        assert len(tool_messages) == 1, completion
        assert "error" in tool_messages[0]["content"] and kind in tool_messages[0]["content"]
        assert reason in tool_messages[0]["content"]
    metrics = trainer._metrics["train"]
    assert metrics[malformed_metric(kind)] == [4.0]
    assert all(metrics[malformed_metric(k)] == [0.0] for k in CASES if k != kind)


def test_too_many_turns_gets_an_error_response_and_a_count(scripted):
    text = '<tool_call>\n{"name": "list_channels", "arguments": {}}\n</tool_call>'
    trainer, completions = scripted(
        text, max_completion_length=200, max_tool_calling_iterations=2, max_tool_calls_per_episode=1
    )
    for completion in completions:
        results = [m["content"] for m in completion if m["role"] == "tool"]
        assert results[0] == "general, eng, ops, sales, design"
        assert "too_many_turns" in results[1] and "at most 1 tool calls per episode" in results[1]
    assert trainer._metrics["train"][malformed_metric("too_many_turns")] == [4.0]
