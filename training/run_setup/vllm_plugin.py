"""The project's vLLM general plugin (entry point `vllm.general_plugins` in pyproject.toml): vLLM runs `register` in
each of its processes, the server's workers included, before it builds a model.

- It registers the gloo weight-transfer engine (training/run_setup/vllm_gloo_engine.py) under its backend name, so a
  server started with `--weight-transfer-config '{"backend": "gloo"}'` can take the trainer's weights on CPU.
- Where the environment sets `LIVE_WEIGHTS_ENV` to 1 (launchers/vllm_server.sh does on CPU), it makes vLLM's CPU
  linears compute from their live weights for the life of the process (training/run_setup/vllm_cpu_weights.py), so
  each sync is seen at once. Other vLLM processes in the same environment keep vLLM's packed kernels.

It imports vLLM and those two modules only when vLLM runs it, and may run several times in one process.
"""

from __future__ import annotations

import os

LIVE_WEIGHTS_ENV = "STRICT_GRPO_VLLM_LIVE_WEIGHTS"
BACKEND = "gloo"  # the weight-transfer backend's name: a server's `--weight-transfer-config '{"backend": "gloo"}'`
_installed = False


def register() -> None:
    global _installed
    from vllm.distributed.weight_transfer.factory import WeightTransferEngineFactory

    if BACKEND not in WeightTransferEngineFactory._registry:  # vLLM refuses a second registration of a name
        WeightTransferEngineFactory.register_engine(BACKEND, "training.run_setup.vllm_gloo_engine",
                                                    "GlooWeightTransferEngine")
    if os.environ.get(LIVE_WEIGHTS_ENV) == "1" and not _installed:
        from training.run_setup.vllm_cpu_weights import install_live_cpu_weights

        install_live_cpu_weights()
        _installed = True
