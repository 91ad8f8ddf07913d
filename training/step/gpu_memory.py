"""GPU memory in the metrics: on CUDA, each optimizer step's peak memory, allocated by tensors and reserved by the
caching allocator, in MiB (`memory/gpu_peak_allocated_mb`, `memory/gpu_peak_reserved_mb`). The peak statistics are
reset when a step begins, so each value is that step's own (generation, loss and optimizer included); the run's peak
is the largest of them (`run_summary.json`, `gpu_memory`)."""

from __future__ import annotations

import torch
from transformers import TrainerCallback

ALLOCATED, RESERVED = "memory/gpu_peak_allocated_mb", "memory/gpu_peak_reserved_mb"


class GpuMemoryCallback(TrainerCallback):
    """Reset the peak statistics of `device` at each step's beginning; append the step's peaks to `metrics` at its
    end (before the held-out evaluation, whose generation is not the step's)."""

    def __init__(self, metrics: dict, device: torch.device):
        self.metrics = metrics
        self.device = device

    def on_step_begin(self, args, state, control, **kwargs):
        torch.cuda.reset_peak_memory_stats(self.device)

    def on_step_end(self, args, state, control, **kwargs):
        self.metrics[ALLOCATED].append(torch.cuda.max_memory_allocated(self.device) / 2**20)
        self.metrics[RESERVED].append(torch.cuda.max_memory_reserved(self.device) / 2**20)


def gpu_memory_callback(metrics: dict, device: torch.device) -> GpuMemoryCallback | None:
    """The callback for a run on a CUDA device; None elsewhere (CPU runs log `memory/rss_mb` only)."""
    return GpuMemoryCallback(metrics, device) if torch.device(device).type == "cuda" else None
