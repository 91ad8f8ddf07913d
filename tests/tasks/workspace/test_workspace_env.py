"""The workspace environment, its goal checkers, its system prompt and the tool-name check (no model needed)."""

import json

import pytest

from training.run_setup.prompt_datasets import load_rows
from training.tasks.workspace.env import GoalError, WorkspaceEnv
from training.tool_use.system_prompt import render_system_prompt, tool_schemas
from training.tool_use.tool_names import ToolNameError, check_tool_names, environment_tool_names

TOOLS = ["create_ticket", "list_channels", "read_channel", "search_messages", "send_slack_message"]


def fresh(task="post_message", **goal) -> WorkspaceEnv:
    env = WorkspaceEnv()
    env.reset(task=task, goal_json=json.dumps(goal), prompt=[])
    return env


def test_tools_act_on_episode_state_only():
    env = fresh(channel="eng", text="deploy done")
    assert env.list_channels() == "general, eng, ops, sales, design"
    assert env.send_slack_message("#eng", "deploy done") == "sent to #eng"
    assert env.read_channel("eng").splitlines()[-1] == "agent: deploy done"
    assert env.search_messages("DEPLOY") == "#eng agent: deploy done"
    assert env.send_slack_message("random", "hi").startswith("error: no channel #random")
    assert env.create_ticket("Login bug", "x", "high") == "created T-1"
    # a new episode starts from the default workspace again
    env.reset(task="post_message", goal_json=json.dumps({"channel": "eng", "text": "x"}))
    assert "agent" not in env.read_channel("eng") and env.state.tickets == []


def test_post_goal_needs_right_text_in_right_channel_and_nothing_else():
    env = fresh(channel="eng", text="deploy done")
    assert env.get_reward() == 0.0
    env.send_slack_message("ops", "deploy done")
    assert env.get_reward() == 0.0  # wrong channel
    env = fresh(channel="eng", text="deploy done")
    env.send_slack_message("eng", "deploy done")
    assert env.get_reward() == 1.0
    env.send_slack_message("general", "spam")
    assert env.get_reward() == 0.0  # posting everywhere does not pass


def test_ticket_goal_checks_title_and_priority():
    env = fresh("create_ticket", title="Login bug", priority="high")
    env.create_ticket("Login bug", "urgent: Login bug", "medium")
    assert env.get_reward() == 0.0
    env = fresh("create_ticket", title="Login bug", priority="high")
    env.create_ticket("Login bug", "urgent: Login bug", "high")
    assert env.get_reward() == 1.0


def test_reset_refuses_rows_without_a_checkable_goal():
    with pytest.raises(GoalError, match="goal_json"):
        WorkspaceEnv().reset(task="post_message", prompt=[])
    with pytest.raises(GoalError, match="unknown workspace task 'dance'"):
        WorkspaceEnv().reset(task="dance", goal_json="{}")


def test_bundled_splits_are_solved_by_their_reference_calls_and_disjoint():
    train, heldout = load_rows("data/workspace/train.jsonl"), load_rows("data/workspace/heldout.jsonl")
    assert {r["prompt"][0]["content"] for r in train}.isdisjoint(r["prompt"][0]["content"] for r in heldout)
    for row in train + heldout:
        env = WorkspaceEnv()
        env.reset(**row)
        assert env.get_reward() == 0.0
        for call in json.loads(row["reference_calls_json"]):
            getattr(env, call["name"])(**call["arguments"])
        assert env.get_reward() == 1.0, row


def test_system_prompt_lists_every_tool_from_the_schemas():
    assert environment_tool_names(WorkspaceEnv) == TOOLS
    text = render_system_prompt("prompts/workspace_agent.jinja", WorkspaceEnv)
    for schema in tool_schemas(WorkspaceEnv):
        name, params = schema["function"]["name"], schema["function"]["parameters"]["properties"]
        assert f"{name}({', '.join(params)})" in text
    check_tool_names(TOOLS, prompts={"prompt": text}, recipe_tools=TOOLS, task_rows={"train": load_rows(
        "data/workspace/train.jsonl")})


def test_misspelled_tool_in_prompt_names_both_spellings():
    text = render_system_prompt("prompts/workspace_agent.jinja", WorkspaceEnv)
    bad = text.replace("send_slack_message", "slack_send_message")
    with pytest.raises(ToolNameError) as err:
        check_tool_names(TOOLS, prompts={"prompts/agent.jinja": bad})
    assert "'slack_send_message'" in str(err.value) and "'send_slack_message'" in str(err.value)
    assert "prompts/agent.jinja" in str(err.value)


def test_recipe_and_task_tool_names_are_checked_both_ways():
    with pytest.raises(ToolNameError, match="missing from the recipe's tool_names"):
        check_tool_names(TOOLS, recipe_tools=TOOLS[:-1])
    row = {"reference_calls_json": json.dumps([{"name": "create_tiket", "arguments": {}}])}
    with pytest.raises(ToolNameError, match=r"tasks\.jsonl row 1 calls tool 'create_tiket'.*'create_ticket'"):
        check_tool_names(TOOLS, task_rows={"tasks.jsonl": [{}, row]})


def test_misspelled_tool_in_prompt_stops_the_run(tmp_path, monkeypatch):
    """Through the entry point: the run stops before any model is built, naming both spellings."""
    from training import train

    prompt = tmp_path / "agent.jinja"
    prompt.write_text("Use slack_send_message to post. Tools: {{ tools | map(attribute='function.name') | join(', ') }}")
    monkeypatch.setattr(train, "resolve_model_path", lambda *a, **k: pytest.fail("the run went past the check"))
    with pytest.raises(ToolNameError) as err:
        train.main(["--config", "recipes/tool_agent_cpu.yaml", "--system_prompt_file", str(prompt),
                    "--output_dir", str(tmp_path / "out")])
    assert "'slack_send_message'" in str(err.value) and "'send_slack_message'" in str(err.value)


def test_reference_tool_call_reward_needs_a_well_formed_call_to_the_right_tool():
    from training.tasks.workspace.rewards import reference_tool_call_reward

    ref = json.dumps([{"name": "send_slack_message", "arguments": {"channel": "eng", "text": "x"}}])

    def turn(name):
        return [{"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
            "name": name, "arguments": {}}}]}]

    completions = [turn("send_slack_message"), turn("create_ticket"), turn("invalid_tool_call"),
                   [{"role": "assistant", "content": "Done."}]]
    assert reference_tool_call_reward(completions, [ref] * 4) == [1.0, 0.0, 0.0, 0.0]
