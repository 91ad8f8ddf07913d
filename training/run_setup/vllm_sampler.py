"""TRL's vLLM sampler built in the dtype the trainer trains in, with weights a sync can reach on CPU.

TRL 1.16 leaves three things to vLLM's defaults that are wrong for a trainer's sampler; they are settled here, and
nowhere else (a server's side: TRL's client swapped for one that syncs on CPU and checks what the server serves,
training/run_setup/vllm_server_client.py):

- **dtype.** TRL builds `LLM(...)` without one, and vLLM's `auto` makes a float32 checkpoint float16 on a GPU and
  bfloat16 on CPU: an fp32 recipe would sample in another precision without a word, and its sample-time log-probs
  (the PPO old log-probs) would be another distribution's. The engine is built in the trainer's dtype, and an engine
  that reports another dtype is refused, naming both.
- **CPU weight packing.** On CPU, vLLM packs each linear weight for its oneDNN kernel and empties it, which breaks a
  weight sync and leaves the tied LM head on the checkpoint's weights; while the engine loads, the linears compute
  from their live weights (training/run_setup/vllm_cpu_weights.py says why and how).
- **llvmlite beside vLLM's CPU worker.** vLLM's CPU worker rebinds its Triton kernels by scanning every loaded
  module's attributes and reading `vars(value)`; llvmlite's `ffi.lib` (loaded by numba, which the causal surrogates
  use) answers `__dict__` with a wrapped C function, and the scan fails (`'_lib_fn_wrapper' object has no attribute
  'get'`). While the engine starts, `ffi.lib.__dict__` reads as an empty dict.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from functools import partial

import trl.generation.vllm_generation as trl_vllm_generation
import trl.trainer.grpo_trainer as trl_grpo_trainer
from trl.generation.vllm_generation import VLLMGeneration

from training.run_setup.vllm_cpu_weights import live_cpu_weights
from training.run_setup.vllm_server_client import (
    CpuSyncVLLMClient,
    ServerMismatchError,
    served_dtype,
    server_mismatch,
)
from training.step.diagnostics import timed
from training.step.sampler_gap import run_precision


class SamplerDtypeError(ValueError):
    """The vLLM engine computes in another dtype than the trainer trains in."""


class RecipeDtypeVLLMGeneration(VLLMGeneration):
    """`VLLMGeneration` whose colocated engine is built in the trainer's dtype (`dtype`: the accelerator's autocast,
    else the weights') and, on CPU, keeps its weights live for syncs; in server mode, whose client syncs on CPU too
    and whose server must serve the trainer's model, dtype and tokenizer. `engine_dtype` is the dtype the engine or
    the server reports (None on processes that do not talk to the server)."""

    def __init__(self, model, accelerator, *args, **kwargs):
        self.dtype = run_precision(accelerator.mixed_precision, model)
        self.engine_dtype: str | None = None
        self.sync_metrics: dict | None = None  # the trainer's metrics, once it has them: `timing/weight_sync_s`
        super().__init__(model, accelerator, *args, **kwargs)

    def sync_weights(self):
        if self.sync_metrics is None:
            return super().sync_weights()
        with timed(self.sync_metrics, "weight_sync"):
            super().sync_weights()

    def _init_vllm(self):
        if self.mode == "server":
            return self._init_server()
        with _llm_built_in(self.dtype), live_cpu_weights(), _llvmlite_survives_kernel_scan():
            super()._init_vllm()
        self.engine_dtype = str(self.llm.llm_engine.model_config.dtype).removeprefix("torch.")
        if self.engine_dtype != self.dtype:
            raise SamplerDtypeError(
                f"the vLLM engine (colocate) computes in {self.engine_dtype} but the trainer trains in {self.dtype}: "
                "its sample-time log-probs would be another precision's. Set the recipe's dtype/bf16/fp16 to one "
                "vLLM runs on this device."
            )

    def _init_server(self):
        """TRL's client swapped for one that syncs on CPU and names a dead server; the server must serve our model."""
        with _swapped(trl_vllm_generation, "VLLMClient", CpuSyncVLLMClient):
            super()._init_vllm()
        if not self.accelerator.is_main_process:
            return
        self.engine_dtype = served_dtype(self.vllm_client)
        mismatch = server_mismatch(self.vllm_client, self.processing_class, self.dtype, self.engine_dtype)
        if mismatch is not None:
            raise ServerMismatchError(f"the vLLM server at {self.vllm_client.base_url} does not serve the trainer's "
                                      f"model: {mismatch}")


def recipe_dtype_sampler():
    """While TRL's `GRPOTrainer.__init__` runs, the vLLM sampler it builds is a `RecipeDtypeVLLMGeneration`."""
    return _swapped(trl_grpo_trainer, "VLLMGeneration", RecipeDtypeVLLMGeneration)


def _llm_built_in(dtype: str):
    return _swapped(trl_vllm_generation, "LLM", partial(trl_vllm_generation.LLM, dtype=dtype))


@contextmanager
def _swapped(module, name: str, value):
    """`module.name` is `value` while the block runs: TRL builds these by their module-level names."""
    original = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, original)


@contextmanager
def _llvmlite_survives_kernel_scan():
    ffi = sys.modules.get("llvmlite.binding.ffi")
    if ffi is None:
        yield
        return
    ffi.lib._fntab["__dict__"] = {}  # `_lib_wrapper.__getattr__` answers from this table first
    try:
        yield
    finally:
        ffi.lib._fntab.pop("__dict__", None)
