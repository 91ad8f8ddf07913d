"""The turn cache (training/tool_use/turn_cache.py) in a real GRPO step and in the held-out loop, on the causal
starting policy, whose episodes make several calls: most context tokens come from the cache, the log-probs recorded
under it are the loss forward's, with forced first turns too (the cache then holds sampled tokens the forced turn
replaced), and the held-out loop plays the same episodes with and without it."""

from __future__ import annotations

from contextlib import nullcontext

import pytest

from tests.tasks.causal.trainer_support import build_sampled_causal_trainer
from training.evaluation import tool_loop
from training.evaluation.episode_settings import EpisodeSettings
from training.outputs.run_summary import read_metrics
from training.run_setup.flags import StrictFlags
from training.tasks.causal.env import CausalEnv
from training.tasks.causal.policy_episodes import causal_reset
from training.tasks.causal.starting_policy import STARTING_POLICY_DIR

EPISODE = dict(max_completion_length=240, max_tool_calling_iterations=4, max_tool_calls_per_episode=4,
               logp_check_steps=1)


@pytest.mark.parametrize("force_rate", [0.0, 0.5])
def test_a_step_reuses_the_cache_and_records_the_loss_forwards_logprobs(force_rate, tmp_path):
    flags = StrictFlags(force_rate=force_rate, assist_warmup=5 if force_rate else 0, rl_disable_forced=True,
                        ppo_record_at_sample=True, strict_traj_keys=True)
    trainer = build_sampled_causal_trainer(str(tmp_path), str(STARTING_POLICY_DIR), flags, **EPISODE)
    trainer.train()
    row = next(r for r in read_metrics(trainer.args.output_dir) if "loss" in r)
    assert row["turns/count"] > 2 * 8  # several turns an episode
    assert row["turns/cache_reused"] > 0.6
    assert row["sampling/logp_abs_diff_max"] < 1e-4
    if force_rate:
        assert row["forced/assist_fraction"] > 0


class _NoCache:
    def __init__(self, pad):
        pass

    def active(self, model):
        return nullcontext()


def test_the_held_out_loop_plays_the_same_episodes_with_and_without_the_cache(tmp_path, monkeypatch):
    flags = StrictFlags(force_rate=0.0, assist_warmup=0, rl_disable_forced=True, ppo_record_at_sample=True,
                        strict_traj_keys=True)
    trainer = build_sampled_causal_trainer(str(tmp_path), str(STARTING_POLICY_DIR), flags, **EPISODE)
    rows = [dict(r) for r in trainer.train_dataset.to_list()[:2]]

    def play(settings):
        return [ep.completion_ids for ep in tool_loop.play_episodes(
            trainer.model, trainer.processing_class, rows, CausalEnv, settings, reset=causal_reset)]

    for settings in (EpisodeSettings.from_trainer(trainer, seed=0).greedy(2), EpisodeSettings.from_trainer(trainer, 3)):
        cached = play(settings)
        with monkeypatch.context() as patch:
            patch.setattr(tool_loop, "TurnCache", _NoCache)
            plain = play(settings)
        # the same tokens up to float rounding: a near-tied draw may go the other way on another CPU, and an episode
        # then runs on differently from there, so the shared prefixes are what is compared
        shared = sum(next((k for k, (a, b) in enumerate(zip(x, y)) if a != b), min(len(x), len(y)))
                     for x, y in zip(cached, plain, strict=True))
        assert shared >= 0.9 * sum(map(len, plain))
        assert min(map(len, cached)) > 30  # episodes of several turns
