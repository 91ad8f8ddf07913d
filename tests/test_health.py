"""Health detectors: a zero loss, all-equal rewards and a pinned PPO ratio are counted, and stop a strict run."""

import json

import pytest

from training.health import RunHealthError, detect


def test_detectors_on_logs():
    healthy = {"loss": -0.01, "grad_norm": 0.3, "frac_reward_zero_std": 0.25, "ratio/std": 0.02, "ratio/mean": 1.0}
    assert not any(detect(healthy, reuse_pass=True).values())
    assert detect({"loss": 0.0, "grad_norm": 0.0}, reuse_pass=False)["health/zero_loss"]
    assert not detect({"loss": 0.0, "grad_norm": 0.1}, reuse_pass=False)["health/zero_loss"]
    assert detect({"frac_reward_zero_std": 1.0}, reuse_pass=False)["health/all_groups_zero_std"]
    pinned = {"ratio/std": 0.0, "ratio/mean": 1.0}
    assert detect(pinned, reuse_pass=True)["health/ratio_pinned"]
    assert not detect(pinned, reuse_pass=False)["health/ratio_pinned"]  # first pass: a ratio of 1 is right


def constant_reward(completions, **kwargs):
    return [1.0] * len(completions)


def test_constant_reward_stops_a_strict_run(make_trainer, tmp_path):
    trainer = make_trainer(reward_funcs=[constant_reward], max_steps=6, health_patience=3)
    with pytest.raises(RunHealthError, match=r"health/(zero_loss|all_groups_zero_std) fired for 3 consecutive steps"):
        trainer.train()
    lines = [json.loads(x) for x in (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()]
    assert [line["health/zero_loss"] for line in lines] == [1.0, 1.0, 1.0]  # the failing step is on disk too
    assert all(line["health/all_groups_zero_std"] == 1.0 for line in lines)


def test_non_strict_run_warns_and_counts(make_trainer, tmp_path, caplog):
    trainer = make_trainer(reward_funcs=[constant_reward], max_steps=4, strict_health=False)
    trainer.train()
    lines = [json.loads(x) for x in (tmp_path / "out" / "metrics.jsonl").read_text().splitlines() if '"loss"' in x]
    assert [line["health/zero_loss"] for line in lines] == [1.0] * 4
    assert caplog.text.count("the loss is exactly 0") == 4


def test_healthy_run_fires_nothing_and_pinned_ratio_is_caught(make_trainer, monkeypatch, tmp_path):
    trainer = make_trainer(num_iterations=2, max_steps=2, learning_rate=0.05)
    trainer.train()
    lines = [json.loads(x) for x in (tmp_path / "out" / "metrics.jsonl").read_text().splitlines() if '"loss"' in x]
    assert [line["health/ratio_pinned"] for line in lines] == [0.0, 0.0]

    # Revert the fix: the "old" log-probs recomputed with the current policy right before the loss.
    from tests.support.reverts import recompute_old_logps_at_loss_time
    from training.trainer import StrictGRPOTrainer

    monkeypatch.setattr(StrictGRPOTrainer, "_compute_loss", recompute_old_logps_at_loss_time)
    broken = make_trainer(num_iterations=2, max_steps=2, learning_rate=0.05, output_dir=str(tmp_path / "broken"))
    broken.train()
    lines = [json.loads(x) for x in (tmp_path / "broken" / "metrics.jsonl").read_text().splitlines() if '"loss"' in x]
    assert [line["health/ratio_pinned"] for line in lines] == [0.0, 1.0]
