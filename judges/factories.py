"""Judges a recipe can name in `reward_funcs` (e.g. `judges.factories.embedding_judge_reward`).

Each name is a `JudgeReward` whose judge is built on first use; the recipe's `judge_kwargs` (a mapping from the
reward's name to keyword arguments) reaches the builder through the trainer, e.g.

    reward_funcs: [judges.factories.embedding_judge_reward, judges.factories.exact_match_reward]
    reward_weights: [0.5, 1.0]
    judge_kwargs: {embedding_judge: {reference_column: answer}}
"""

from __future__ import annotations

from judges.adapter import JudgeReward
from judges.embedding import EmbeddingJudge
from judges.llm import LLMGroupJudge
from judges.llm_backends import OpenAIChatBackend, TransformersChatBackend
from judges.protocol import JudgeConfigError
from judges.reward_model import RewardModelJudge
from judges.verifiers import ExactMatchJudge, FormatJudge, JsonValidityJudge, ToolCallValidityJudge


def build_llm_judge(
    model: str | None = None,
    base_url: str | None = None,
    served_model: str | None = None,
    max_new_tokens: int = 128,
    timeout_s: float = 60.0,
    api_key_env: str | None = None,
    **judge_kwargs,
) -> LLMGroupJudge:
    """An `LLMGroupJudge` on a local model (`model`: a path or hub id; the trainer resolves `tiny-qwen3`) or an
    OpenAI-compatible endpoint (`base_url` + `served_model`); exactly one of the two. Other kwargs go to
    `LLMGroupJudge`."""
    if (model is None) == (base_url is None):
        raise JudgeConfigError("llm_judge: give exactly one of judge_kwargs.llm_judge.model or .base_url")
    if base_url is not None:
        if not served_model:
            raise JudgeConfigError("llm_judge: base_url needs served_model (the endpoint's model name)")
        backend = OpenAIChatBackend(
            base_url, served_model, timeout_s=timeout_s, max_tokens=max_new_tokens, api_key_env=api_key_env
        )
    else:
        backend = TransformersChatBackend(model, max_new_tokens=max_new_tokens)
    return LLMGroupJudge(backend, **judge_kwargs)


def build_reward_model_judge(model_path: str | None = None, **kwargs) -> RewardModelJudge:
    """A `RewardModelJudge`; `model_path` is required."""
    if model_path is None:
        raise JudgeConfigError("reward_model_judge: judge_kwargs.reward_model_judge.model_path is required")
    return RewardModelJudge(model_path, **kwargs)


embedding_judge_reward = JudgeReward(name="embedding_judge", build=EmbeddingJudge)
llm_judge_reward = JudgeReward(name="llm_judge", build=build_llm_judge)
reward_model_judge_reward = JudgeReward(name="reward_model_judge", build=build_reward_model_judge)
exact_match_reward = JudgeReward(name="exact_match", build=ExactMatchJudge)
format_reward = JudgeReward(name="format", build=FormatJudge)
json_valid_reward = JudgeReward(name="json_valid", build=JsonValidityJudge)
tool_call_valid_reward = JudgeReward(name="tool_call_valid", build=ToolCallValidityJudge)
