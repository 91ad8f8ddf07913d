"""Dynamic sampling leaves no zero-variance group in the batch when enough prompts exist; the zero-std watch warns."""

import zlib

import pytest
import torch

from training.features.dynamic_sampling import select_rows, signal_groups
from training.features.zero_std_watch import next_streak
from training.tasks.larger_number.rewards import completion_text


def odd_answers_only_reward(completions, answer, **kwargs):
    """Constant (no signal) for prompts whose answer is even; a spread of values for odd ones."""
    return [
        1.0 if int(a) % 2 == 0 else float(zlib.crc32(completion_text(c).encode()) % 1000)
        for c, a in zip(completions, answer, strict=True)
    ]


def _batch_inputs(rows, num_generations):
    return [dict(row) for row in rows for _ in range(num_generations)]


@pytest.mark.parametrize("dynamic", [True, False])
def test_dynamic_sampling_leaves_no_zero_variance_group(make_trainer, task_rows, dynamic):
    even = [r for r in task_rows if int(r["answer"]) % 2 == 0]
    odd = [r for r in task_rows if int(r["answer"]) % 2 == 1]
    trainer = make_trainer(
        rows=even[:8] + odd[:24],
        reward_funcs=[odd_answers_only_reward],
        dynamic_sampling=dynamic,
        dynamic_sampling_max_rounds=6,
    )
    trainer.model.train()
    inputs = _batch_inputs([even[0], even[1]], trainer.num_generations)  # 2 groups, both without signal
    output = trainer._generate_and_score_completions(inputs)

    assert output["completion_ids"].shape[0] == len(inputs)  # the batch keeps its size
    assert output["prompt_ids"].shape[0] == output["advantages"].shape[0] == len(inputs)
    group_advantages = output["advantages"].view(-1, trainer.num_generations)
    zero_variance = [bool((a == 0).all()) for a in group_advantages]
    texts = trainer.processing_class.batch_decode(output["prompt_ids"], skip_special_tokens=True)
    if dynamic:
        assert not any(zero_variance)
        assert all(t == texts[i - i % 4] for i, t in enumerate(texts))  # groups stay whole after stitching
        assert not any(f"{even[0]['answer']}?" in t or f"{even[1]['answer']}?" in t for t in texts)
        assert output["num_items_in_batch"].item() == output["completion_mask"].sum().item()
        metrics = trainer._metrics["train"]
        assert metrics["dynamic_sampling/dropped_groups"][-1] >= 2
        assert metrics["dynamic_sampling/kept_frac_first_round"][-1] == 0.0
        assert metrics["dynamic_sampling/unfilled_groups"][-1] == 0
    else:
        assert all(zero_variance)  # the check above would catch a batch left as it came


def test_dynamic_sampling_trains(make_trainer, task_rows):
    trainer = make_trainer(max_steps=1, reward_funcs=[odd_answers_only_reward], dynamic_sampling=True)
    trainer.train()
    logged = [h for h in trainer.state.log_history if "loss" in h][0]
    assert logged["dynamic_sampling/unfilled_groups"] == 0


def test_signal_groups_and_select_rows():
    rewards = torch.tensor([1.0, 1.0, 0.0, 2.0, float("nan"), float("nan"), 3.0, float("nan")])
    assert signal_groups(rewards, 2) == [False, True, False, False]
    a = {"prompt_ids": torch.tensor([[5, 6], [5, 6]]), "completion_ids": torch.tensor([[1], [2]]), "tag": "x"}
    b = {"prompt_ids": torch.tensor([[7], [8]]), "completion_ids": torch.tensor([[3, 4], [5, 6]]), "tag": "x"}
    merged = select_rows([(a, [1]), (b, [0])], pad_token_id=0)
    assert merged["prompt_ids"].tolist() == [[5, 6], [0, 7]]  # prompts left-padded, like TRL
    assert merged["completion_ids"].tolist() == [[2, 0], [3, 4]]  # completions right-padded
    with pytest.raises(ValueError, match="'tag'"):
        select_rows([(a, [0]), ({**b, "tag": "y"}, [0])], pad_token_id=0)


def test_zero_std_streak_warns_after_k_batches(make_trainer, caplog):
    assert [next_streak(s, f, 0.5) for s, f in [(0, 0.9), (1, 0.9), (2, 0.4)]] == [1, 2, 0]

    def constant(completions, **kwargs):
        return [1.0] * len(completions)

    trainer = make_trainer(max_steps=2, reward_funcs=[constant], zero_std_warn_threshold=0.5, zero_std_warn_steps=2)
    with caplog.at_level("WARNING", logger="training.features.zero_std_watch"):
        trainer.train()
    streaks = [h["zero_std/streak"] for h in trainer.state.log_history if "zero_std/streak" in h]
    assert streaks == [1.0, 2.0]
    assert "frac_reward_zero_std has been above 0.50 for 2 generation batches" in caplog.text
    assert "turn on dynamic_sampling" in caplog.text


def test_zero_std_warning_with_dynamic_sampling_on_does_not_advise_turning_it_on(make_trainer, caplog):
    def constant(completions, **kwargs):
        return [1.0] * len(completions)

    trainer = make_trainer(max_steps=2, reward_funcs=[constant], zero_std_warn_threshold=0.5, zero_std_warn_steps=2,
                           dynamic_sampling=True, dynamic_sampling_max_rounds=1)
    with caplog.at_level("WARNING", logger="training.features.zero_std_watch"):
        trainer.train()
    assert "raise dynamic_sampling_max_rounds" in caplog.text and "turn on dynamic_sampling" not in caplog.text
