"""Branches of the tool loop (training/evaluation/tool_loop.py): an episode replayed to a turn is the episode (the
same state, the same tokens; played on greedily, the same episode), a forced call is the call the environment
makes, and each model turn's tokens and the state it was made in are kept."""

from __future__ import annotations

import pytest

from training.evaluation.episode_settings import EpisodeSettings
from training.evaluation.tool_loop import Branch, continue_branches, episode_turn_end, play_episodes
from training.features.forcing import tool_call_text
from training.run_setup.prompt_datasets import load_rows
from training.tasks.causal.env import CausalEnv
from training.tasks.causal.splits import DATA_DIR
from training.tasks.causal.starting_policy import STARTING_POLICY_DIR

SETTINGS = EpisodeSettings(max_completion_length=720, max_iterations=6, max_tool_calls=6, max_turn_tokens=48,
                           template_kwargs={"enable_thinking": False})


@pytest.fixture(scope="module")
def policy():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(STARTING_POLICY_DIR), AutoTokenizer.from_pretrained(
        STARTING_POLICY_DIR)


@pytest.fixture(scope="module")
def row():
    return load_rows(DATA_DIR / "heldout.jsonl")[0]


def test_an_episode_replayed_to_a_turn_is_the_episode_and_plays_on_as_it_did(policy, row):
    model, tokenizer = policy
    (episode,) = play_episodes(model, tokenizer, [row], CausalEnv, SETTINGS.greedy())
    assert episode.turns >= 4
    assert [episode.turn_ids(t) for t in range(episode.turns)] == [
        episode.completion_ids[a:b] for a, b in episode.turn_spans]
    keys = episode.episode_tools.turn_states
    assert sorted(keys) == list(range(6)) and keys[0][0] == 0 and keys[3][0] == 3  # calls made before each turn
    prefix = tuple(tuple(episode.turn_ids(t)) for t in range(3))
    replayed, played_on = (
        continue_branches(model, tokenizer, [Branch(0, row, 0, prefix, None)], CausalEnv, SETTINGS.greedy(),
                          play=play)[0] for play in (False, True))
    assert replayed.env.state_key == keys[3][1]  # the state the episode's fourth call was made in
    assert replayed.completion_ids == episode.completion_ids[: len(replayed.completion_ids)]
    assert played_on.completion_ids == episode.completion_ids
    assert played_on.env.trace.interventions == episode.env.trace.interventions


def test_a_forced_option_is_the_call_the_environment_makes(policy, row):
    model, tokenizer = policy
    rule = episode_turn_end(model, tokenizer, SETTINGS)
    start = CausalEnv()
    start.reset(**row)
    options = start.belief.options
    for k, option in enumerate(options, start=1):
        forced = tuple(rule.finish(tokenizer(tool_call_text("choose", {"option": k}), add_special_tokens=False)[
            "input_ids"])[0])
        (ep,) = continue_branches(model, tokenizer, [Branch(0, row, 0, (forced,), None)], CausalEnv, SETTINGS,
                                  play=False)
        assert ep.env.trace.interventions == [option.call]
        assert ep.turn_ids(0) == list(forced)
