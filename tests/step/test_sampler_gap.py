"""The sampler/trainer log-prob gap (training/step/sampler_gap.py, training/features/record_at_sample.py): measured by
default in every run that can have one, with no flag; a gap above its precision's normal warns by name."""

from __future__ import annotations

import logging

import pytest
import torch

from training.features import record_at_sample
from training.features.record_at_sample import RecordAtSample
from training.outputs.run_summary import read_metrics
from training.step.sampler_gap import DEFAULT_CHECK_EVERY, NORMAL_MEAN_GAP, gap_plan, run_precision

GENERATE = "transformers generate"


@pytest.mark.parametrize(("device", "precision", "sampler", "every"), [
    ("cpu", "float32", GENERATE, 0),
    ("cpu", "bfloat16", GENERATE, DEFAULT_CHECK_EVERY),
    ("cpu", "float16", GENERATE, DEFAULT_CHECK_EVERY),
    ("cuda", "float32", GENERATE, DEFAULT_CHECK_EVERY),
    ("cpu", "float32", "vLLM (server)", DEFAULT_CHECK_EVERY),
])  # fmt: skip
def test_the_check_is_on_by_default_wherever_a_gap_can_arise(device, precision, sampler, every):
    plan = gap_plan(None, None, device, precision, sampler)
    assert plan.check_every == every
    assert plan.warn_above == NORMAL_MEAN_GAP[precision]
    assert gap_plan(0, None, "cuda", "bfloat16", sampler).check_every == 0  # the recipe's number is kept
    assert gap_plan(3, 0.5, device, precision, sampler).check_every == 3
    assert gap_plan(3, 0.5, device, precision, sampler).warn_above == 0.5


def test_the_runs_precision_is_the_lowest_of_autocast_and_weights():
    fp32, bf16 = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2).to(torch.bfloat16)
    assert run_precision("no", fp32) == "float32"
    assert run_precision("bf16", fp32) == "bfloat16"
    assert run_precision("no", bf16) == "bfloat16"
    assert run_precision("fp16", bf16) == "float16"


def batch_with_gap(gap: float) -> tuple[dict, torch.Tensor]:
    recomputed = torch.full((2, 3), -1.0)
    batch = {"sampling_per_token_logps": recomputed + gap, "completion_mask": torch.ones(2, 3, dtype=torch.int)}
    return batch, recomputed


def test_a_gap_above_its_precisions_normal_warns_naming_sampler_dtype_and_cause(caplog):
    record = RecordAtSample(True, gap_plan(1, None, "cpu", "float32", GENERATE, "float32"))
    metrics: dict = {"sampling/logp_abs_diff": [], "sampling/logp_abs_diff_max": [],
                     "sampling/logp_gap_above_normal": []}
    with caplog.at_level(logging.WARNING):
        record.log_logp_gap(*batch_with_gap(1e-6), metrics)
    assert metrics["sampling/logp_gap_above_normal"] == [0.0] and not caplog.records
    with caplog.at_level(logging.WARNING):
        record.log_logp_gap(*batch_with_gap(0.05), metrics)
    assert metrics["sampling/logp_gap_above_normal"] == [0.0, 1.0]
    assert metrics["sampling/logp_abs_diff"][1] == pytest.approx(0.05, rel=1e-4)
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "sampler: transformers generate in float32, trainer in float32" in warning
    assert "Likely cause: in float32 sampler and trainer agree to ~1e-6" in warning
    bf16 = RecordAtSample(True, gap_plan(1, None, "cpu", "bfloat16", GENERATE, "bfloat16"))
    bf16.log_logp_gap(*batch_with_gap(0.05), metrics)  # 5e-2 is above bfloat16's normal (1e-2) too
    assert metrics["sampling/logp_gap_above_normal"][-1] == 1.0


def test_a_check_with_no_sampled_token_in_the_loss_is_counted_not_a_crash():
    record = RecordAtSample(True, gap_plan(1, None, "cpu", "float32", GENERATE, "float32"))
    batch, recomputed = batch_with_gap(0.0)
    batch["completion_mask"] = torch.zeros(2, 3, dtype=torch.int)  # e.g. every row forced
    metrics: dict = {"sampling/logp_check_empty": []}
    record.log_logp_gap(batch, recomputed, metrics)
    assert metrics == {"sampling/logp_check_empty": [1.0]}


def step_logs(trainer) -> list[dict]:
    return [row for row in read_metrics(trainer.args.output_dir) if "loss" in row]


def test_a_bf16_cpu_run_measures_its_gap_without_a_flag_and_an_fp32_one_does_not(make_trainer):
    bf16 = make_trainer(bf16=True, max_steps=1, strict_health=False)
    assert bf16.record.gap.check_every == DEFAULT_CHECK_EVERY and bf16.args.logp_check_steps is None
    bf16.train()
    (log,) = step_logs(bf16)
    assert 1e-5 < log["sampling/logp_abs_diff"] < NORMAL_MEAN_GAP["bfloat16"]  # bf16 autocast vs an fp32 sampler
    assert log["sampling/logp_abs_diff_max"] >= log["sampling/logp_abs_diff"]
    assert log["sampling/logp_gap_above_normal"] == 0.0

    fp32 = make_trainer(max_steps=1, strict_health=False, output_dir=str(bf16.args.output_dir) + "-fp32")
    assert fp32.record.gap.check_every == 0
    fp32.train()
    (log,) = step_logs(fp32)
    assert "sampling/logp_abs_diff" not in log


def test_a_sampler_that_records_other_log_probs_is_caught_by_name(make_trainer, monkeypatch, caplog):
    """A sampler off by 0.05 nats per token (as one whose weights were not synced): the fp32 run's check warns."""
    recorded = record_at_sample.sampled_token_logprobs
    monkeypatch.setattr(record_at_sample, "sampled_token_logprobs",
                        lambda *a, **k: [[v + 0.05 for v in row] for row in recorded(*a, **k)])
    trainer = make_trainer(logp_check_steps=1, max_steps=1, strict_health=False)
    with caplog.at_level(logging.WARNING, logger="training.features.record_at_sample"):
        trainer.train()
    (log,) = step_logs(trainer)
    assert log["sampling/logp_abs_diff"] == pytest.approx(0.05, abs=1e-3)
    assert log["sampling/logp_gap_above_normal"] == 1.0
    assert any("sampler: transformers generate in float32, trainer in float32" in r.getMessage() for r in caplog.records)


def test_the_default_check_with_the_features_it_meets(make_trainer):
    """bf16 with dynamic sampling, a value head, a hard-synced reference adapter and two iterations per generation
    batch: the default check measures the first of the two generation batches (every 10th, counting batches, not
    sampling rounds or optimizer steps), the other features log as usual."""
    trainer = make_trainer(
        bf16=True, max_steps=4, strict_health=False, learning_rate=5e-3,
        dynamic_sampling=True, dynamic_sampling_max_rounds=2, advantage_estimator="gae",
        beta=0.04, sync_ref_model=True, ref_model_sync_steps=1, ref_model_mixup_alpha=1.0, num_iterations=2,
    )  # fmt: skip
    trainer.train()
    logs = step_logs(trainer)
    assert [("sampling/logp_abs_diff" in log) for log in logs] == [True, False, False, False]
    assert trainer.record.generation_batches_seen == 2
    assert 1e-5 < logs[0]["sampling/logp_abs_diff"] < NORMAL_MEAN_GAP["bfloat16"]
    assert logs[0]["ratio/std"] < 0.02  # first pass: the bf16 trainer against the fp32 sampler's log-probs
    for log in logs:
        assert torch.isfinite(torch.tensor([log["loss"], log["value/loss"]])).all()
        assert log["ref_sync/param_diffs"] == 0


def test_the_summary_gives_the_whole_runs_gap():
    from training.outputs.run_measures import sampler_gap

    plan = gap_plan(None, None, "cuda", "bfloat16", GENERATE).as_json()
    rows = [{"loss": 0.1, "sampling/logp_abs_diff": 1e-3, "sampling/logp_abs_diff_max": 0.05,
             "sampling/logp_gap_above_normal": 0.0},
            {"loss": 0.2},  # a step the check did not measure
            {"loss": 0.3, "sampling/logp_abs_diff": 3e-2, "sampling/logp_abs_diff_max": 0.2,
             "sampling/logp_gap_above_normal": 1.0}]
    summary = sampler_gap(rows, plan)
    assert summary["check_every"] == DEFAULT_CHECK_EVERY and summary["why"] == "default on: CUDA, bfloat16"
    assert summary["measured_steps"] == 2 and summary["steps_above_normal"] == 1
    assert summary["logp_abs_diff_mean"] == pytest.approx(1.55e-2) and summary["logp_abs_diff_max"] == 0.2
    assert sampler_gap([{"loss": 0.1}], plan)["logp_abs_diff_mean"] is None  # never measured: no number, not 0
