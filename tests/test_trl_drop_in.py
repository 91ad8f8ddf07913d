"""StrictGRPOTrainer is a drop-in GRPOTrainer: an override given a trainer shell built as TRL's own rollout-dispatch
tests build theirs (`object.__new__` and the attributes TRL's method reads) behaves as TRL's method does, rather than
failing on an attribute only our `__init__` sets (issue 34)."""

from types import SimpleNamespace

import pytest
import torch
from trl import GRPOTrainer

from training.trainer import StrictGRPOTrainer


def shell(cls):
    trainer = object.__new__(cls)
    trainer.accelerator = SimpleNamespace(device=torch.device("cpu"), is_main_process=True, process_index=0,
                                          gather=lambda t: t)
    trainer.args = SimpleNamespace(report_to=[])
    trainer.model = SimpleNamespace(training=True)
    trainer.state = SimpleNamespace(global_step=0, num_input_tokens_seen=0)
    trainer._last_loaded_step = 0
    trainer.use_vllm = False
    trainer.use_transformers_continuous_batching = False
    trainer.rollout_func = lambda prompts, trainer: {"prompt_ids": [[1]], "completion_ids": [[2]]}  # no logprobs
    return trainer


@pytest.mark.parametrize("cls", [GRPOTrainer, StrictGRPOTrainer])
def test_a_rollout_func_missing_keys_is_trls_own_error_on_a_shell(cls):
    with pytest.raises(ValueError, match=r"rollout_func must return keys \['logprobs'\]"):
        shell(cls)._generate([[{"role": "user", "content": "hi"}]])
