"""`benchmarks/episode_ends.py` says how sampled episodes end: an episode's calls, budget and length are the played
episode's own, its refused calls the environment's and the tool layer's, and the summary counts the short episodes by
their last turn, the calls they left and whether a call of theirs was refused."""

from __future__ import annotations

from transformers import AutoModelForCausalLM, AutoTokenizer

from benchmarks.episode_ends import episode_end, summary
from training.evaluation.episode_settings import EpisodeSettings
from training.evaluation.spec import spec_from_recipe
from training.evaluation.tool_loop import play_episodes
from training.run_setup.prompt_datasets import load_rows
from training.tasks.causal.env import make_causal_env
from training.tasks.causal.episode_source import CAUSAL_RECIPE
from training.tasks.causal.policy_episodes import causal_reset
from training.tasks.causal.starting_policy import DATA_FILES, STARTING_POLICY_DIR


def test_an_episodes_end_is_the_played_episodes_own():
    tokenizer = AutoTokenizer.from_pretrained(STARTING_POLICY_DIR)
    model = AutoModelForCausalLM.from_pretrained(STARTING_POLICY_DIR).eval()
    settings = EpisodeSettings.from_spec(spec_from_recipe(str(CAUSAL_RECIPE), build_model=False))
    rows = load_rows(DATA_FILES[1])[:2]
    played = play_episodes(model, tokenizer, rows, make_causal_env("exact"), settings, reset=causal_reset)
    for ep in played:
        end = episode_end(ep, tokenizer)
        assert (end["calls"], end["budget"]) == (ep.env.trace.used, rows[ep.row]["budget"])
        assert end["refused"] == sum(ep.env.trace.invalid.values()) + sum(ep.malformed.values())
        assert end["tokens"] == len(ep.prompt_ids) + len(ep.completion_ids) > len(ep.prompt_ids)
        if end["calls"] == end["budget"]:
            assert "<tool_call>" not in end["last_turn"]  # the turn after the last call makes none


def test_the_summary_counts_the_short_episodes_by_how_they_ended():
    ends = [{"calls": 6, "budget": 6, "refused": 1, "tokens": 700, "last_turn": "Done."},
            {"calls": 5, "budget": 6, "refused": 0, "tokens": 800, "last_turn": "Done."},
            {"calls": 4, "budget": 6, "refused": 2, "tokens": 1020, "last_turn": "1 2, 2 5"},
            {"calls": 5, "budget": 6, "refused": 0, "tokens": 900, "last_turn": "Done."}]
    result = summary(ends, context=1024)
    assert result["short_of_budget"] == 0.75
    assert result["calls_left_when_short"] == {1: 2, 2: 1}
    assert result["last_turn_when_short"] == {"Done.": 2, "other": 1}
    assert result["short_within_16_tokens_of_context"] == 1
    assert result["short_with_a_refused_call"] == 1  # the full episode's refusal is not counted
    assert result["tokens_p50_p90_max"][2] == 1020
