"""vLLM's CPU linears made to compute from their live weights, so a weight sync is seen at once.

On CPU, vLLM packs each linear weight for its oneDNN or SGL kernel once the checkpoint is loaded and then replaces the
weight by an empty tensor (`dispatch_cpu_unquantized_gemm` in vllm/model_executor/layers/utils.py). A weight sync
writes into those weights, so it fails (`'Parameter' object has no attribute 'weight_loader'`); and the LM head,
packed from the tied embedding without removing it, would go on computing with the checkpoint's weights after every
sync (vLLM's layerwise reload re-runs the embedding's processing only). While this is installed, every
two-dimensional linear computes from its own weight with torch's `linear`. The colocated sampler installs it while
its engine loads (training/run_setup/vllm_sampler.py); a server started by launchers/vllm_server.sh installs it in
every vLLM process through the plugin (training/run_setup/vllm_plugin.py). What it costs on CPU is in BENCHMARKS.md
("vLLM on CPU").

This module imports torch and vLLM only: it is loaded inside vLLM's worker processes.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch


def install_live_cpu_weights():
    """Replace vLLM's CPU GEMM dispatch (on CPU only); returns what it replaced (None where nothing was)."""
    from vllm.model_executor.layers import utils as vllm_layer_utils
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return None
    original = vllm_layer_utils.dispatch_cpu_unquantized_gemm

    def dispatch(layer: torch.nn.Module, remove_weight: bool) -> None:
        if layer.weight.ndim != 2 or layer.weight.is_meta:
            return original(layer, remove_weight)
        layer.cpu_linear = torch.nn.functional.linear

    vllm_layer_utils.dispatch_cpu_unquantized_gemm = dispatch
    return original


@contextmanager
def live_cpu_weights():
    """`install_live_cpu_weights` while the block runs (while an engine loads)."""
    from vllm.model_executor.layers import utils as vllm_layer_utils

    original = install_live_cpu_weights()
    try:
        yield
    finally:
        if original is not None:
            vllm_layer_utils.dispatch_cpu_unquantized_gemm = original
