"""Where a causal LM's final hidden state (the LM head's input) can be read, for any architecture transformers builds.

The place is the model's backbone, `model.base_model` (the submodule named by `base_model_prefix`: `model` for
Qwen/Llama/Gemma/Phi/NemotronH, `gpt_neox`, `backbone` for Mamba, ...), and the tensor is its output's
`last_hidden_state`. That is exactly what both forwards a GRPO run makes feed the LM head:

- TRL's loss forward (`add_fused_lm_head`, trl/trainer/utils.py) calls `self.base_model(...)` and projects its
  `last_hidden_state` with the LM head's weight, without calling the head module (so a hook on the head would never
  fire there);
- the plain forward (sampling, the held-out evaluation) of every `*ForCausalLM` runs the backbone and applies
  `get_output_embeddings()` to its `last_hidden_state` (tests/features/test_decoder_families.py checks this
  equality family by family).

A final norm hook, by contrast, needs the norm's name, which differs between families (`norm`, `norm_f`,
`final_layer_norm`, ...). A model without a backbone distinct from itself or without output embeddings has no such
place: `backbone` returns None and the callers decide (the precision probe warns, the value head refuses).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from peft import PeftModel


def transformers_model(model: torch.nn.Module) -> torch.nn.Module:
    """The transformers model under a PEFT wrapper (the model itself otherwise)."""
    return model.get_base_model() if isinstance(model, PeftModel) else model


def architecture(model: torch.nn.Module) -> str:
    """The class name of the transformers model under any PEFT wrapper, for error messages."""
    return type(transformers_model(model)).__name__


def backbone(model: torch.nn.Module) -> torch.nn.Module | None:
    """The module whose output's `last_hidden_state` is the LM head's input, or None where the model has none (no
    `base_model` distinct from the model, or no output embeddings)."""
    base = transformers_model(model)
    get_head = getattr(base, "get_output_embeddings", None)
    if get_head is None or get_head() is None:
        return None
    body = getattr(base, "base_model", None)
    if not isinstance(body, torch.nn.Module) or body is base:
        return None
    return body


def last_hidden_state(output) -> torch.Tensor | None:
    """The `last_hidden_state` of a backbone's output (a `ModelOutput`, or a tuple with `return_dict=False`)."""
    hidden = getattr(output, "last_hidden_state", None)
    if hidden is None and isinstance(output, tuple) and output:
        hidden = output[0]
    return hidden if isinstance(hidden, torch.Tensor) else None


def hook_final_hidden_state(model: torch.nn.Module, fn: Callable[[torch.Tensor | None], None]):
    """Call `fn` with the final hidden state (None when the backbone's output has none) after every backbone forward
    (whatever `fn` returns is ignored); returns the hook's handle. Raises TypeError naming the architecture when the
    model has no backbone."""
    body = backbone(model)
    if body is None:
        raise TypeError(f"{architecture(model)} has no final hidden state to read: no backbone module "
                        "(`base_model`) distinct from the model whose output the LM head reads")

    def observe(module, args, output) -> None:  # returns None: the backbone's output goes on unchanged
        fn(last_hidden_state(output))

    return body.register_forward_hook(observe)
