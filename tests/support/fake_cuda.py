"""torch.cuda's peak memory statistics faked, for testing the GPU memory metrics on a CPU machine."""

from __future__ import annotations

import torch

MIB = 2**20


class FakeCudaMemory:
    """torch.cuda's peak statistics for a device whose steps allocate `peaks_mib` in turn (reserved = 2 x)."""

    def __init__(self, peaks_mib: list[float]):
        self.peaks = list(peaks_mib)
        self.peak = 0.0
        self.resets = 0

    def reset_peak_memory_stats(self, device=None):
        self.resets += 1
        self.peak = self.peaks.pop(0) if self.peaks else 0.0  # what the step about to run will reach

    def max_memory_allocated(self, device=None):
        return self.peak * MIB

    def max_memory_reserved(self, device=None):
        return 2 * self.peak * MIB


def fake_cuda(monkeypatch, peaks_mib) -> FakeCudaMemory:
    fake = FakeCudaMemory(peaks_mib)
    for name in ("reset_peak_memory_stats", "max_memory_allocated", "max_memory_reserved"):
        monkeypatch.setattr(torch.cuda, name, getattr(fake, name))
    return fake
