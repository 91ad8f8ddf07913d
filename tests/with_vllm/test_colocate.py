"""TRL's colocated vLLM sampler on CPU, as the trainer uses it: built in the trainer's dtype, its sample-time
log-probs the old log-probs, its weights the trainer's after every sync."""

from __future__ import annotations

import contextlib
import json

import pytest

from tests.support.vllm_engine import engine_gap
from tests.test_feature_combinations import check_cell, training_logs
from training.run_setup import vllm_sampler
from training.run_setup.flags import read_flags

pytestmark = pytest.mark.vllm

FP32_GAP = 1e-4  # the recipe's bound for float32 (training/step/sampler_gap.py NORMAL_MEAN_GAP)
VLLM = dict(use_vllm=True, vllm_mode="colocate", logp_check_steps=1)


def fixed_tokens(trainer) -> list[int]:
    return trainer.processing_class("Which number is larger: 37 or 52? The larger number is 52.")["input_ids"]


def test_the_engine_samples_in_float32_and_holds_the_trainers_weights_after_every_sync(make_trainer):
    trainer = make_trainer(**VLLM, max_steps=3, learning_rate=5e-2)
    assert trainer.vllm_generation.engine_dtype == "float32"
    assert trainer.record.gap.sampler_dtype == "float32" and trainer.record.gap.precision == "float32"
    tokens = fixed_tokens(trainer)
    assert engine_gap(trainer, tokens) < FP32_GAP  # the checkpoint as loaded
    trainer.train()
    logs = training_logs(trainer.args.output_dir)
    assert len(logs) == 3
    gaps = [log["sampling/logp_abs_diff"] for log in logs]
    assert all(gap <= FP32_GAP for gap in gaps), gaps
    assert all(log["sampling/logp_gap_above_normal"] == 0.0 for log in logs)
    assert all(log["timing/weight_sync_s"] > 0 for log in logs)  # each step's batch is sampled after a sync
    trainer.vllm_generation.sync_weights()  # what the next generation batch would start with
    assert engine_gap(trainer, tokens) < FP32_GAP


def test_a_skipped_sync_leaves_the_engine_on_old_weights_and_the_gap_check_says_so(make_trainer, monkeypatch):
    trainer = make_trainer(**VLLM, max_steps=3, learning_rate=5e-2, strict_health=False)
    monkeypatch.setattr(type(trainer.vllm_generation), "sync_weights", lambda self: None)
    trainer.train()
    logs = training_logs(trainer.args.output_dir)
    assert logs[0]["sampling/logp_abs_diff"] <= FP32_GAP  # the first batch is sampled before any update
    assert logs[-1]["sampling/logp_abs_diff"] > FP32_GAP and logs[-1]["sampling/logp_gap_above_normal"] == 1.0
    assert engine_gap(trainer, fixed_tokens(trainer)) > 10 * FP32_GAP


def test_without_live_cpu_weights_vllm_empties_the_linears_a_sync_writes_into(make_trainer, monkeypatch):
    """The reason `live_cpu_weights` exists: vLLM's own CPU dispatch leaves nothing for a sync to write."""
    monkeypatch.setattr(vllm_sampler, "live_cpu_weights", contextlib.nullcontext)
    trainer = make_trainer(**VLLM, max_steps=1)
    with pytest.raises(AttributeError, match="weight_loader"):
        trainer.vllm_generation.sync_weights()


def test_a_bf16_recipe_samples_in_bf16(make_trainer):
    trainer = make_trainer(**VLLM, bf16=True, max_steps=1, strict_health=False)
    assert trainer.vllm_generation.engine_dtype == "bfloat16" == trainer.record.gap.sampler_dtype
    trainer.train()
    (log,) = training_logs(trainer.args.output_dir)
    assert log["sampling/logp_abs_diff"] < 1e-2  # bf16's normal


def test_an_engine_in_another_dtype_is_refused_naming_both(make_trainer, monkeypatch):
    original = vllm_sampler._llm_built_in
    monkeypatch.setattr(vllm_sampler, "_llm_built_in", lambda dtype: original("bfloat16"))
    with pytest.raises(vllm_sampler.SamplerDtypeError, match=r"computes in bfloat16 but the trainer trains in float32"):
        make_trainer(**VLLM, max_steps=1)


def test_run_summary_records_the_samplers_dtype_beside_the_trainers(make_trainer):
    trainer = make_trainer(**VLLM, max_steps=1)
    trainer.train()
    plan = trainer.record.gap.as_json()
    assert plan["sampler"] == "vLLM (colocate)" and plan["sampler_dtype"] == "float32" == plan["precision"]
    json.dumps(plan)  # what run_summary.json's `sampler_gap` is built from


@pytest.mark.parametrize("cell", [(True, "grpo", True, True, 2), (False, "gae", False, False, 1)],
                         ids=["ds1-grpo-force1-sync1-it2", "ds0-gae-force0-sync0-it1"])
def test_the_tool_agent_trains_on_vllm_with_the_features_it_meets(make_env_trainer, cell):
    """Multi-turn through the environment with the turn limit and the stop at the call, dynamic sampling, forcing,
    reference sync, `num_iterations` 2 or the value head (gae), sample-time log-probs from vLLM on every step."""
    dynamic, estimator, forcing, sync, iterations = cell
    from tests.test_feature_combinations import cell_settings

    trainer = make_env_trainer(flags=read_flags({"FORCE_RATE": "0.5" if forcing else "0.0", "ASSIST_WARMUP": "10"}),
                               max_steps=3, max_turn_tokens=16, **VLLM,
                               **cell_settings(dynamic, estimator, sync, iterations))
    assert trainer.vllm_generation.max_completion_length == 16  # every request's max_tokens is the turn's limit
    trainer.train()
    logs = training_logs(trainer.args.output_dir)
    check_cell(logs, dynamic, estimator, forcing, sync, iterations, steps=3)
    generated = [log for log in logs if "timing/generate_s" in log]  # num_iterations 2 reuses a batch
    assert len(generated) == (2 if iterations == 2 else 3)
    for log in generated:
        assert log["sampling/logp_abs_diff"] <= FP32_GAP, log["sampling/logp_abs_diff"]
        assert 0 < log["turns/max_tokens"] <= 16
    assert max(log["turns/cut"] for log in generated) > 0  # the untrained model runs on: vLLM stops it at the limit
