"""The metric-name contract (training/step/metric_names.py) is what a run logs: a smoke run with every feature on carries every
non-causal name in `metrics.jsonl` (a tool run the turn names), and docs/architecture.md lists the same names."""

from __future__ import annotations

from pathlib import Path

import torch

from judges.factories import exact_match_reward
from tests.support.fake_cuda import fake_cuda
from tests.support.tiny_trainer import length_reward
from training.outputs.run_summary import read_metrics
from training.step.gpu_memory import GpuMemoryCallback
from training.step.metric_names import CONTRACT, CREDIT, TOOL_RUN, TOOL_RUN_TRANSFORMERS, VLLM_SAMPLER, contract

ROOT = Path(__file__).resolve().parents[2]


def test_a_run_with_every_feature_on_logs_the_whole_contract(make_trainer, monkeypatch):
    trainer = make_trainer(
        reward_funcs=[length_reward, exact_match_reward],
        judge_kwargs={"exact_match": {"reference_column": "answer"}},
        advantage_estimator="gae",
        beta=0.04, sync_ref_model=True, ref_model_sync_steps=1,
        logp_check_steps=1, max_steps=2, strict_health=False,
    )
    # the GPU memory a CUDA run logs, with torch.cuda's statistics faked on this CPU (tests/step/test_gpu_memory.py)
    fake_cuda(monkeypatch, [100.0, 100.0])
    trainer.add_callback(GpuMemoryCallback(trainer._metrics["train"], torch.device("cuda", 0)))
    trainer.train()
    logged = set().union(*(row for row in read_metrics(trainer.args.output_dir) if "loss" in row))
    # the generic names; a task's are its own tests' (test_causal_training_smoke), a tool run's the next test's, a
    # tool environment's credit its combination test's (tests/tasks/causal/test_credit_combinations.py), vLLM's the
    # vLLM tests' (tests/with_vllm/)
    expected = {name for name, when in CONTRACT.items()
                if when not in (TOOL_RUN, TOOL_RUN_TRANSFORMERS, VLLM_SAMPLER, *CREDIT)}
    assert sorted(expected - logged) == []


def test_a_tool_run_logs_its_turn_names(make_env_trainer):
    trainer = make_env_trainer(max_steps=1, strict_health=False)
    trainer.train()
    logged = set().union(*(row for row in read_metrics(trainer.args.output_dir) if "loss" in row))
    assert sorted({name for name, when in CONTRACT.items() if when in (TOOL_RUN, TOOL_RUN_TRANSFORMERS)} - logged) == []


def test_the_architecture_doc_lists_the_contract():
    doc = (ROOT / "docs" / "architecture.md").read_text()
    assert [name for name in contract() if f"`{name}`" not in doc] == []


def test_a_task_registers_its_own_metric_names():
    whole = contract()
    causal = sorted(name for name, when in whole.items() if when == "causal environment")
    assert "causal/regret" in causal and "rewards/optimization/mean" in causal and "surrogate/updates" in causal
    assert not set(causal) & set(CONTRACT)  # none of them in the generic module
