"""Tiny random causal LMs of the decoder families TRL's own GRPO/SFT/RLOO tests train, built offline from configs
(transformers' classes, random weights, a few hundred thousand parameters each), for the tiny Qwen3's tokenizer."""

from __future__ import annotations

import torch
import transformers as tf

# Every family: two layers of width 64 (what a family needs beyond that is in its entry).
SHARED = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
              max_position_embeddings=512)
MOE = dict(num_experts_per_tok=2, moe_intermediate_size=32)

# name: (config class, model class, what the family needs beyond SHARED)
FAMILIES = {
    "qwen2": (tf.Qwen2Config, tf.Qwen2ForCausalLM, {}),
    "qwen3": (tf.Qwen3Config, tf.Qwen3ForCausalLM, dict(head_dim=16)),
    "qwen2_moe": (tf.Qwen2MoeConfig, tf.Qwen2MoeForCausalLM,
                  dict(MOE, num_experts=4, shared_expert_intermediate_size=32)),
    "qwen3_moe": (tf.Qwen3MoeConfig, tf.Qwen3MoeForCausalLM, dict(MOE, head_dim=16, num_experts=4)),
    "llama": (tf.LlamaConfig, tf.LlamaForCausalLM, {}),
    "gemma": (tf.GemmaConfig, tf.GemmaForCausalLM, dict(head_dim=16)),
    "gemma2": (tf.Gemma2Config, tf.Gemma2ForCausalLM, dict(head_dim=16)),
    "gemma3_text": (tf.Gemma3TextConfig, tf.Gemma3ForCausalLM, dict(head_dim=16)),
    "phi": (tf.PhiConfig, tf.PhiForCausalLM, {}),
    "phi3": (tf.Phi3Config, tf.Phi3ForCausalLM, {}),
    "gpt_neox": (tf.GPTNeoXConfig, tf.GPTNeoXForCausalLM, {}),
    "cohere2": (tf.Cohere2Config, tf.Cohere2ForCausalLM, {}),
    "olmo3": (tf.Olmo3Config, tf.Olmo3ForCausalLM, {}),
    "gpt_oss": (tf.GptOssConfig, tf.GptOssForCausalLM,
                dict(head_dim=16, num_local_experts=4, num_experts_per_tok=2)),
    "glm4_moe": (tf.Glm4MoeConfig, tf.Glm4MoeForCausalLM,
                 dict(MOE, head_dim=16, n_routed_experts=4, first_k_dense_replace=1, n_group=1, topk_group=1)),
    "lfm2": (tf.Lfm2Config, tf.Lfm2ForCausalLM, dict(layer_types=["conv", "full_attention"])),
    # the hybrid: a Mamba-2 mixer, attention and a MoE layer; its final norm is `norm_f` (issue 55)
    "nemotron_h": (tf.NemotronHConfig, tf.NemotronHForCausalLM,
                   dict(MOE, num_hidden_layers=3, layers_block_type=["mamba", "attention", "moe"], head_dim=16,
                        mamba_num_heads=4, mamba_head_dim=16, ssm_state_size=16, n_groups=1, chunk_size=16,
                        n_routed_experts=4, moe_shared_expert_intermediate_size=32)),
    # attention-free: the backbone is `backbone`, its final norm `norm_f`
    "falcon_mamba": (tf.FalconMambaConfig, tf.FalconMambaForCausalLM, dict(state_size=8)),
}


def build_family_model(name: str, tokenizer, seed: int = 0) -> tf.PreTrainedModel:
    """A randomly initialised `name` model (a key of FAMILIES) for `tokenizer`, seeded, in float32."""
    config_class, model_class, extra = FAMILIES[name]
    config = config_class(**{**SHARED, **extra}, vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                          bos_token_id=None, eos_token_id=tokenizer.eos_token_id)
    torch.manual_seed(seed)
    model = model_class(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model
