"""One real GRPO step on the causal environment (TRL's sampler, multi-turn tools, the four reward functions): the
causal metrics and the per-component rewards reach `metrics.jsonl`; causal rows can be forced (FORCE_RATE) from
their expert trace; the held-out evaluation goes through the causal task's one evaluator, returns the causal held-out
metrics and writes the episodes' records, the same records `python -m training.evaluate` writes."""

import math

from tests.tasks.causal.trainer_support import build_sampled_causal_trainer, causal_rows
from training.evaluation.episodes import read_episodes
from training.outputs.run_summary import read_metrics
from training.run_setup.flags import StrictFlags
from training.step.metric_names import contract
from training.tasks.causal.reward_components import COMPONENTS

CAUSAL_METRICS = [name for name, when in contract().items() if when == "causal environment"]


def test_a_causal_training_step_logs_every_causal_metric(causal_model_dir, tmp_path):
    flags = StrictFlags(force_rate=0.5, assist_warmup=1, rl_disable_forced=True, ppo_record_at_sample=True,
                        strict_traj_keys=True)
    trainer = build_sampled_causal_trainer(str(tmp_path), causal_model_dir, flags, heldout_rows=causal_rows(2),
                                           heldout_samples_per_prompt=1)
    assert trainer.heldout.task.name == "causal"
    trainer.train()
    (log,) = [row for row in read_metrics(tmp_path) if "loss" in row]
    missing = [name for name in CAUSAL_METRICS if name not in log]
    assert not missing, missing
    assert all(math.isfinite(log[name]) for name in CAUSAL_METRICS)
    assert log["forced/assist_fraction"] > 0 and log["forced/rl_fraction"] == 0.0
    assert log["surrogate/updates"] > 1.0  # the initial rows, then at least the forced calls' rows
    held = trainer.evaluate_heldout()
    assert {"heldout/reward", "heldout/regret", "heldout/parent_f1", "heldout/info_gain", "heldout/invalid_calls",
            "heldout/greedy_reward", "heldout/greedy_regret", *(f"heldout/{c}" for c in COMPONENTS)} <= set(held)
    assert all(math.isfinite(v) for v in held.values())
    assert trainer.evaluate_heldout() == held  # the same paired episodes from the same seed
    step_dir = tmp_path / "heldout" / "step-000001"
    sampled, greedy = read_episodes(step_dir), read_episodes(step_dir / "eval_greedy.jsonl")
    assert len(sampled) == len(greedy) == 2  # 2 rows: 1 sampled + 1 greedy episode each
    assert [e.extra["decoding"] for e in sampled + greedy] == ["sampled"] * 2 + ["greedy"] * 2
    assert held["heldout/regret"] == sum(e.metrics["regret"] for e in sampled) / 2
    assert held["heldout/ended_at_limit"] == sum(e.extra["ended_at_limit"] for e in sampled + greedy)
    assert held["heldout/greedy_regret"] == sum(e.metrics["regret"] for e in greedy) / 2
