"""Every judge end to end inside a tiny-Qwen3 GRPO run on CPU, with its failures counted and visible."""

import json
import math

import pytest

from judges import factories
from judges.adapter import JudgeFailureRateError
from training.run_setup.flags import read_flags
from training.tasks.larger_number.rewards import completion_text


def _metrics(trainer):
    """The lines of the run's metrics.jsonl (what a user sees)."""
    with open(trainer.args.output_dir + "/metrics.jsonl") as f:
        return [json.loads(line) for line in f]


def _length_reward(completions, **kwargs):
    return [-float(len(completion_text(c))) for c in completions]


def test_tiny_qwen3_llm_judge_failures_are_counted_not_fatal_below_threshold(make_trainer, tiny_model_dir):
    trainer = make_trainer(
        max_steps=1,
        reward_funcs=[factories.llm_judge_reward, _length_reward],
        judge_kwargs={"llm_judge": {"model": tiny_model_dir, "num_shuffles": 2, "max_new_tokens": 8}},
        judge_retries=0,
        judge_max_failure_rate=1.0,
    )
    trainer.train()
    step = [m for m in _metrics(trainer) if "loss" in m][0]
    groups = 8 // 4
    assert step["judge/groups"] == groups
    assert step["judge/failures"] == groups  # the untrained tiny model never answers the JSON asked for
    assert step["judge/calls"] == groups * 2  # one call per group and shuffle, not per completion
    assert step["rewards/llm_judge/nan_count"] == 8 and step["rewards/nan_count"] == 8
    assert step["rewards/llm_judge/mean"] is None  # TRL logs a mean of only NaNs as null: visible, never a silent 0
    assert step["rewards/unscorable_count"] == 0  # the length reward still scores every row
    assert math.isfinite(step["loss"])


def test_tiny_qwen3_llm_judge_over_threshold_stops_strict_run_with_raw_output(make_trainer, tiny_model_dir):
    assert read_flags().strict_traj_keys
    trainer = make_trainer(
        max_steps=1,
        reward_funcs=[factories.llm_judge_reward, _length_reward],
        judge_kwargs={"llm_judge": {"model": tiny_model_dir, "num_shuffles": 1, "max_new_tokens": 8}},
        judge_retries=1,
        judge_max_failure_rate=0.5,
    )
    with pytest.raises(JudgeFailureRateError, match="judge raw output") as err:
        trainer.train()
    assert "2 of 2 groups failed" in str(err.value)


def test_embedding_judge_and_verifier_weighted_in_a_run(make_trainer):
    trainer = make_trainer(
        max_steps=1,
        reward_funcs=[factories.embedding_judge_reward, factories.exact_match_reward],
        reward_weights=[0.5, 1.0],
        judge_kwargs={"embedding_judge": {"reference_column": "answer"}},
    )
    trainer.train()
    step = [m for m in _metrics(trainer) if "loss" in m][0]
    assert 0.0 < step["rewards/embedding_judge/mean"] <= 1.0
    assert 0.0 <= step["rewards/exact_match/mean"] <= 1.0
    assert step["reward"] == pytest.approx(
        0.5 * step["rewards/embedding_judge/mean"] + step["rewards/exact_match/mean"], abs=1e-5
    )
    assert step["judge/calls"] == 2 * 2  # two judges, two groups each: summed, not averaged
    assert step["judge/failures"] == 0 and step["rewards/nan_count"] == 0


def test_reward_model_judge_in_a_run(make_trainer, tiny_model_dir, tmp_path):
    from transformers import AutoConfig, AutoTokenizer, Qwen3ForSequenceClassification

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    config = AutoConfig.from_pretrained(tiny_model_dir, num_labels=1, pad_token_id=tokenizer.pad_token_id)
    Qwen3ForSequenceClassification(config).save_pretrained(tmp_path / "rm")
    tokenizer.save_pretrained(tmp_path / "rm")
    trainer = make_trainer(
        max_steps=1,
        reward_funcs=[factories.reward_model_judge_reward],
        judge_kwargs={"reward_model_judge": {"model_path": str(tmp_path / "rm")}},
    )
    trainer.train()
    step = [m for m in _metrics(trainer) if "loss" in m][0]
    assert step["judge/calls"] == 2 and step["judge/failures"] == 0
    assert math.isfinite(step["rewards/reward_model_judge/mean"]) and step["rewards/reward_model_judge/std"] > 0


def test_unknown_judge_kwargs_key_is_refused(make_trainer):
    with pytest.raises(ValueError, match="embeding_judge"):
        make_trainer(reward_funcs=[factories.embedding_judge_reward], judge_kwargs={"embeding_judge": {}})


def test_nan_from_a_plain_reward_function_is_counted(make_trainer):
    def sometimes_none(completions, **kwargs):
        return [None if i % 4 == 0 else -float(len(completion_text(c))) for i, c in enumerate(completions)]

    trainer = make_trainer(max_steps=1, reward_funcs=[sometimes_none])
    trainer.train()
    step = [m for m in _metrics(trainer) if "loss" in m][0]
    assert step["rewards/nan_count"] == 2 and step["rewards/sometimes_none/nan_count"] == 2
    assert step["rewards/unscorable_count"] == 2


def test_embedding_judge_recipe_parses_and_names_judges():
    from training.train import import_reward, parse_args

    script_args, training_args, _ = parse_args(["--config", "recipes/tiny_cpu_embedding_judge.yaml"])
    rewards = [import_reward(name) for name in script_args.reward_funcs]
    from training.tasks.larger_number.rewards import answer_format_reward, exact_answer_reward

    assert rewards == [factories.embedding_judge_reward, exact_answer_reward, answer_format_reward]
    assert training_args.reward_weights == [0.5, 0.5, 0.5]
    assert training_args.judge_kwargs == {"embedding_judge": {"reference_column": "answer"}}
