"""Health detectors: a zero loss, all-equal rewards, a pinned PPO ratio, a non-finite loss or gradient and a gradient
spike are counted, and stop a strict run (a non-finite gradient before it is applied, with a checkpoint saved)."""

import json
import math

import pytest
import torch

from types import SimpleNamespace

from training.step.health import HealthMonitorCallback, RunHealthError, detect


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


# ---- non-finite loss or gradient, gradient spikes --------------------------------------------------------------------
def test_nonfinite_loss_and_gradient_are_detected():
    assert detect({"loss": float("nan"), "grad_norm": 0.3}, reuse_pass=False)["health/nonfinite_loss"]
    assert detect({"loss": 0.1, "grad_norm": float("inf")}, reuse_pass=False)["health/nonfinite_loss"]
    assert not detect({"loss": 0.1, "grad_norm": 0.3}, reuse_pass=False)["health/nonfinite_loss"]


def test_grad_spike_is_k_times_the_median_of_recent_finite_nonzero_norms_after_a_warmup():
    recent = [1.0, 0.0, 2.0, float("nan"), 1.5, 0.5, 1.0]  # finite non-zero: 1, 2, 1.5, 0.5, 1 -> median 1.0

    def spike(grad_norm, **kwargs):
        return detect({"loss": 0.1, "grad_norm": grad_norm}, False, recent, **kwargs)["health/grad_spike"]

    assert spike(10.5) and not spike(9.5)
    assert not spike(10.5, spike_factor=20.0) and not spike(10.5, spike_factor=0.0)
    assert not spike(10.5, spike_warmup=6)  # only 5 usable norms seen so far
    assert not spike(float("nan"))  # that is health/nonfinite_loss's job


def test_a_near_deterministic_policys_hundredfold_jump_below_the_floor_is_no_spike():
    """Gradient norms ~1e-4 with one group the policy is unsure of at ~1e-2: 100x the median, far below the clipping
    threshold; the floor (grad_spike_floor x max_grad_norm) keeps it from firing, a jump to half the threshold
    still fires, and without clipping the floor is grad_spike_floor itself."""
    from types import SimpleNamespace

    from training.step.health import spike_floor

    recent = [1e-4] * 10
    floor = spike_floor(SimpleNamespace(grad_spike_floor=0.1, max_grad_norm=1.0))
    assert floor == pytest.approx(0.1)

    def spike(grad_norm):
        return detect({"loss": 0.1, "grad_norm": grad_norm}, False, recent, spike_floor=floor)["health/grad_spike"]

    assert not spike(1e-2) and spike(0.5)
    assert detect({"loss": 0.1, "grad_norm": 1e-2}, False, recent)["health/grad_spike"]  # the old rule: a spike
    assert spike_floor(SimpleNamespace(grad_spike_floor=0.1, max_grad_norm=0.0)) == pytest.approx(0.1)
    assert spike_floor(SimpleNamespace(grad_spike_floor=0.2, max_grad_norm=5.0)) == pytest.approx(1.0)


def test_streaks_and_grad_norms_are_rebuilt_from_the_checkpoint_history_on_resume():
    from types import SimpleNamespace

    from training.step.health import HealthMonitorCallback

    callback = HealthMonitorCallback(SimpleNamespace(is_reuse_pass=lambda: False))
    history = [{"loss": 0.0, "grad_norm": 1.0, "health/zero_loss": 1.0}] * 2 + [{"train_runtime": 1.0}]
    callback.on_train_begin(None, SimpleNamespace(log_history=history), None)
    assert callback.streaks["health/zero_loss"] == 2 and list(callback.grad_norms) == [1.0, 1.0]
    args = SimpleNamespace(grad_spike_factor=10.0, grad_spike_warmup=2, strict_health=True, health_patience=3,
                           grad_spike_floor=0.1, max_grad_norm=1.0, turn_cut_rise=0.1)
    callback.on_log(args, SimpleNamespace(global_step=3), None, logs={"loss": 0.0, "grad_norm": 0.0})
    assert "health/zero_loss fired for 3 consecutive steps" in str(callback.error)  # 2 before the resume, 1 after
    callback.error = None
    callback.on_log(args, SimpleNamespace(global_step=4), None, logs={"loss": 0.1, "grad_norm": 50.0})
    assert callback.streaks["health/grad_spike"] == 1


def nan_forward_from_step(trainer, step: int):
    """Make the training forward (grad enabled; sampling runs without grad) NaN from optimizer step `step` on."""
    module = next(m for n, m in trainer.model.named_modules() if n.endswith("q_proj.lora_B.default"))
    poison = lambda mod, inputs, out: (  # noqa: E731
        out * float("nan") if torch.is_grad_enabled() and trainer.state.global_step >= step - 1 else out
    )
    module.register_forward_hook(poison)


def test_nan_loss_is_logged_as_it_is_and_counted(make_trainer, tmp_path):
    trainer = make_trainer(max_steps=2, strict_health=False)
    nan_forward_from_step(trainer, 2)
    trainer.train()
    lines = [json.loads(x) for x in (tmp_path / "out" / "metrics.jsonl").read_text().splitlines() if '"loss"' in x]
    assert [line["health/nonfinite_loss"] for line in lines] == [0.0, 1.0]
    assert math.isnan(lines[1]["loss"])  # not replaced by the running average (logging_nan_inf_filter is off)


def test_nan_gradient_stops_a_strict_run_before_the_update_with_a_checkpoint(make_trainer, tmp_path):
    from safetensors.torch import load_file

    from training.outputs.checkpoints import incompleteness, train_saving_on_stop

    trainer = make_trainer(max_steps=4, save_strategy="steps", save_steps=100)
    nan_forward_from_step(trainer, 2)
    with pytest.raises(RunHealthError, match=r"health/nonfinite_loss: the gradient of step 2 is NaN or infinite"):
        train_saving_on_stop(trainer, None)
    checkpoint = tmp_path / "out" / "checkpoint-1"
    assert incompleteness(checkpoint) is None
    saved = load_file(checkpoint / "adapter_model.safetensors")
    assert all(torch.isfinite(t).all() for t in saved.values())
    assert all(torch.isfinite(p).all() for p in trainer.model.parameters())  # the NaN update was never applied


def test_a_step_without_a_valid_call_is_said_in_words_naming_the_causes_and_does_not_stop_the_run(caplog):
    """Issue 44: a policy that names variables the SCM does not have, or writes calls the tool layer cannot parse,
    makes no valid call; the step says so, with the counts its logs show by kind, and leaves the stop to zero_loss."""
    assert not detect({"loss": 0.1}, reuse_pass=False)["health/no_valid_calls"]  # an environment that does not report
    assert not detect({"tools/valid_calls": 0.5}, reuse_pass=False)["health/no_valid_calls"]
    logs = {"loss": 0.0, "grad_norm": 0.0, "tools/valid_calls": 0.0, "tools/malformed/bad_json": 21.0,
            "tools/malformed/unknown_tool": 0.0, "tools/refused/unknown_variable": 1.9}
    monitor = HealthMonitorCallback(SimpleNamespace(is_reuse_pass=lambda: False))
    args = SimpleNamespace(grad_spike_factor=10.0, grad_spike_warmup=5, grad_spike_floor=0.1, max_grad_norm=1.0,
                           strict_health=True, health_patience=1, turn_cut_rise=0.1)
    monitor.on_log(args, SimpleNamespace(global_step=1), None, logs=logs)
    assert logs["health/no_valid_calls"] == 1.0
    said = [r.getMessage() for r in caplog.records if "no rollout made a tool call" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("step 1: ")
    assert "malformed/bad_json 21; refused/unknown_variable 1.9" in said[0] and "unknown_tool" not in said[0]
    assert isinstance(monitor.error, RunHealthError) and "zero_loss" in str(monitor.error)  # the stop is zero_loss's


def test_a_run_that_stays_at_the_jumped_gradient_norms_keeps_firing_and_stops():
    """CBO seed 0 at 74cbebf (docs/causal.md, "Your own SCM"): norms about 0.02, then 0.59, 0.27, 0.22, 0.32, 0.33,
    0.30 as its completions grew to the length limit. With the spikes in the median's window, 0.22 fell under 10 times
    it, the streak broke, and from then on the collapse's own norms raised the reference: no stop. Spikes stay out of
    the window, so the run stops at the third jumped step; a resume rebuilds the same window."""
    norms = [0.02, 0.041, 0.008, 0.043, 0.02, 0.019, 0.018, 0.542, 0.05, 0.021, 0.019, 0.033, 0.023, 0.052, 0.02,
             0.018, 0.025, 0.02, 0.017, 0.04, 0.023, 0.132, 0.059]  # steps 1 to 23, spike at step 8
    args = SimpleNamespace(grad_spike_factor=10.0, grad_spike_warmup=5, grad_spike_floor=0.1, max_grad_norm=1.0,
                           strict_health=True, health_patience=3, turn_cut_rise=0.1)
    monitor = HealthMonitorCallback(SimpleNamespace(is_reuse_pass=lambda: False))
    history = []
    for step, norm in enumerate(norms + [0.592, 0.266, 0.223], start=1):
        logs = {"loss": 0.01, "grad_norm": norm}
        monitor.on_log(args, SimpleNamespace(global_step=step), None, logs=logs)
        history.append(logs)
    assert [log["health/grad_spike"] for log in history[-3:]] == [1.0, 1.0, 1.0]
    assert history[7]["health/grad_spike"] == 1.0 and 0.542 not in monitor.grad_norms
    assert "health/grad_spike fired for 3 consecutive steps (up to step 26)" in str(monitor.error)
    resumed = HealthMonitorCallback(SimpleNamespace(is_reuse_pass=lambda: False))
    resumed.on_train_begin(None, SimpleNamespace(log_history=history), None)
    assert list(resumed.grad_norms) == list(monitor.grad_norms)


# ---- turns that grow -------------------------------------------------------------------------------------------------
def test_the_share_of_cut_turns_rising_above_its_median_is_lengthening():
    def fires(cut, recent, **kwargs):
        logs = {"loss": 0.1, "grad_norm": 0.3, "turns/count": 100.0, "turns/cut": cut}
        return detect(logs, False, recent_cut_shares=recent, **kwargs)["health/turn_lengthening"]

    calm = [0.0, 0.01, 0.0, 0.02, 0.0]
    assert fires(12.0, calm) and not fires(9.0, calm)  # 0.12 >= 0 + 0.1; 0.09 is not
    assert not fires(12.0, calm[:4])  # too few steps seen
    assert not fires(12.0, calm, cut_rise=0.0)  # off
    assert not fires(85.0, [0.8] * 5)  # high from the start (an untrained policy): no lengthening
    assert not detect({"loss": 0.1, "grad_norm": 0.3}, False, recent_cut_shares=calm)["health/turn_lengthening"]


def test_a_run_whose_turns_grow_stops_naming_max_turn_tokens_where_the_old_detectors_see_nothing(make_env_trainer,
                                                                                                  tmp_path):
    """Steps 1-5: every token may end the turn (EOS favoured), so turns are short and varied; from step 6 no turn can
    end and each is cut at the limit, as a policy's that starts to run on. The detectors that existed before see
    nothing; `health/turn_lengthening` fires on steps 6 and 7 and stops the run."""
    trainer = make_env_trainer(max_turn_tokens=16, max_steps=12, health_patience=2, learning_rate=1e-4)
    spec = trainer.turn_limits.spec

    def hook(module, inputs, output):
        out = output.clone()
        if trainer.state.global_step < 5:
            out[..., spec.stop_ids[0]] = out.logsumexp(dim=-1) - 1.0  # an EOS about one token in four
        else:
            out[..., list(spec.sampler_stops)] = -math.inf
        return out

    handle = trainer.model.get_output_embeddings().register_forward_hook(hook)
    try:
        with pytest.raises(RunHealthError, match=r"health/turn_lengthening fired for 2 consecutive steps \(up to step "
                                                 r"7\).*max_turn_tokens"):
            trainer.train()
    finally:
        handle.remove()
    lines = [json.loads(x) for x in (tmp_path / "out" / "metrics.jsonl").read_text().splitlines() if '"loss"' in x]
    assert [line["health/turn_lengthening"] for line in lines] == [0.0] * 5 + [1.0, 1.0]
    assert [line["turns/cut"] == line["turns/count"] for line in lines] == [False] * 5 + [True, True]
    old = ("health/zero_loss", "health/all_groups_zero_std", "health/ratio_pinned", "health/nonfinite_loss",
           "health/grad_spike")
    assert [name for name in old if any(line[name] for line in lines)] == []
