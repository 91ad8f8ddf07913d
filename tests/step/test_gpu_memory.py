"""GPU memory in the metrics (training/step/gpu_memory.py), on CPU with torch.cuda's memory statistics faked: each
step logs its own peak (the statistics are reset as the step begins, so a large first step does not hide a smaller
second one), and the run's peak is the largest. On a CUDA machine (`-m gpu`, the GPU check) a real run logs them."""

from __future__ import annotations

import pytest
import torch

from tests.support.fake_cuda import fake_cuda
from training import trainer as trainer_module
from training.outputs.run_measures import gpu_memory
from training.outputs.run_summary import read_metrics
from training.step.gpu_memory import GpuMemoryCallback, gpu_memory_callback

def test_only_a_cuda_run_gets_the_callback():
    assert gpu_memory_callback({}, torch.device("cpu")) is None
    assert isinstance(gpu_memory_callback({}, torch.device("cuda", 0)), GpuMemoryCallback)


def test_each_step_logs_its_own_peak_and_the_summary_the_runs(make_trainer, monkeypatch, tmp_path):
    fake = fake_cuda(monkeypatch, [300.0, 100.0, 200.0])
    cpu = make_trainer(output_dir=str(tmp_path / "cpu"))
    assert "GpuMemoryCallback" not in [type(c).__name__ for c in cpu.callback_handler.callbacks]
    # the trainer asks for the callback of its device; here the device is taken for a CUDA one
    monkeypatch.setattr(trainer_module, "gpu_memory_callback",
                        lambda metrics, device: GpuMemoryCallback(metrics, torch.device("cuda", 0)))
    trainer = make_trainer(max_steps=3, strict_health=False, output_dir=str(tmp_path / "cuda"))
    trainer.train()
    rows = [r for r in read_metrics(trainer.args.output_dir) if "loss" in r]
    assert [r["memory/gpu_peak_allocated_mb"] for r in rows] == [300.0, 100.0, 200.0]
    assert [r["memory/gpu_peak_reserved_mb"] for r in rows] == [600.0, 200.0, 400.0]
    assert fake.resets == 3
    assert gpu_memory(rows) == {"peak_allocated_mb": 300.0, "peak_reserved_mb": 600.0, "steps": 3}
    assert gpu_memory([{"loss": 1.0, "memory/rss_mb": 500.0}]) is None  # a CPU run: no GPU numbers, not zeros


@pytest.mark.gpu
def test_a_cuda_run_logs_its_gpu_memory_and_its_gap_without_a_flag(make_trainer):
    """On a CUDA GPU, with no flag: each step's peak memory, and the log-prob check on the first generation batch
    (float32: sampler and trainer agree, the first ratio is 1)."""
    trainer = make_trainer(use_cpu=False, bf16=False, max_steps=2, strict_health=False)
    assert trainer.record.gap.check_every == 10 and trainer.record.gap.why == "default on: CUDA"
    trainer.train()
    rows = [r for r in read_metrics(trainer.args.output_dir) if "loss" in r]
    for row in rows:
        assert 0 < row["memory/gpu_peak_allocated_mb"] <= row["memory/gpu_peak_reserved_mb"]
    assert rows[0]["sampling/logp_abs_diff"] < 1e-4 and "sampling/logp_abs_diff" not in rows[1]
    assert abs(rows[0]["ratio/mean"] - 1) < 1e-5
