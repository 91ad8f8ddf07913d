"""Record-at-sample log-probs: equal to a recompute, used as the PPO old log-probs, one forward cheaper."""

import pytest
import torch
from trl import GRPOTrainer

from training.algorithms.sampled_logprobs import sampled_token_logprobs
from training.algorithms.trajectory import TrajectoryKeyError
from training.run_setup.flags import read_flags

FLAGS_TRL_PATH = read_flags({"PPO_RECORD_AT_SAMPLE": "0"})


def _recompute(trainer, batch):
    """TRL's own log-prob forward (the one the loss uses), on the batch's sequences."""
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    with torch.no_grad():
        logps, _, _ = GRPOTrainer._get_per_token_logps_and_entropies(
            trainer, trainer.model, ids, mask, batch["completion_ids"].size(1)
        )
    return logps


def _generation_batch(trainer, task_rows, n_prompts=2):
    rows = [dict(r) for r in task_rows[:n_prompts] for _ in range(trainer.num_generations)]
    return trainer._generate_and_score_completions(rows)


@pytest.mark.parametrize("temperature,top_p,min_p", [(0.7, 1.0, None), (1.3, 0.8, None), (1.0, 1.0, 0.1)])
def test_sample_time_logps_equal_recompute(make_trainer, task_rows, temperature, top_p, min_p):
    """Under a tail cut (top-p, min-p) too: the sampler draws from the cut distribution, and the loss's old log-probs
    are the recorded full-vocabulary ones, equal to its own forward."""
    trainer = make_trainer(temperature=temperature, top_p=top_p, min_p=min_p, max_completion_length=8)
    batch = _generation_batch(trainer, task_rows)
    recorded = batch["sampling_per_token_logps"]
    mask = batch["completion_mask"].bool()
    assert mask.sum() > 4
    gap = (recorded - _recompute(trainer, batch))[mask].abs().max().item()
    assert gap < 1e-4
    # and the recorded values are real log-probs of sampled tokens, not a placeholder
    assert (recorded[mask] < 0).all()
    assert torch.equal(batch["old_per_token_logps"], recorded)


def test_sampled_token_logprobs_uses_temperature_before_truncation():
    logits = torch.tensor([[2.0, 1.0, -1.0]])
    got = sampled_token_logprobs((logits,), [[1]], temperature=0.5)
    expected = torch.log_softmax(logits / 0.5, dim=-1)[0, 1].item()
    assert got == [[pytest.approx(expected, abs=1e-7)]]


def _ratio_logs(trainer):
    return [h for h in trainer.state.log_history if "ratio/mean" in h]


def test_ratio_is_one_on_first_pass_and_moves_on_second(make_trainer):
    trainer = make_trainer(num_iterations=2, max_steps=2, learning_rate=0.3, epsilon=0.05)
    trainer.train()
    first, second = _ratio_logs(trainer)
    assert first["ratio/mean"] == pytest.approx(1.0, abs=1e-4)
    assert first["ratio/std"] < 1e-3
    assert second["ratio/std"] > 0.0
    assert second["clip_ratio/region_mean"] > 0.0


class _ForwardCounter:
    """Counts policy forwards that score full sequences (TRL passes `labels`; generate's steps do not)."""

    def __init__(self, model):
        self.count = 0
        self.handle = model.get_base_model().register_forward_pre_hook(self, with_kwargs=True)

    def __call__(self, module, args, kwargs):
        self.count += "labels" in kwargs and kwargs["labels"] is not None


def test_one_fewer_policy_forward_per_generation_batch(make_trainer):
    counts = {}
    for name, flags in (("record", None), ("trl", FLAGS_TRL_PATH)):
        trainer = make_trainer(num_iterations=2, max_steps=2, flags=flags)
        counter = _ForwardCounter(trainer.model)
        trainer.train()
        counts[name] = counter.count
    # one generation batch, two loss passes over it: TRL adds one no-grad forward for the old log-probs
    assert counts == {"record": 2, "trl": 3}


def test_trl_path_still_logs_ratio(make_trainer):
    trainer = make_trainer(num_iterations=2, max_steps=2, flags=FLAGS_TRL_PATH)
    trainer.train()
    assert len(_ratio_logs(trainer)) == 2


def test_misnamed_old_logps_key_raises_naming_both(make_trainer, task_rows):
    trainer = make_trainer()
    batch = _generation_batch(trainer, task_rows)
    batch["old_log_probs"] = batch.pop("old_per_token_logps")
    with pytest.raises(TrajectoryKeyError) as err:
        trainer.compute_loss(trainer.model, batch)
    assert "old_log_probs" in str(err.value) and "old_per_token_logps" in str(err.value)


def test_non_strict_keys_warn_and_count(make_trainer, task_rows, caplog):
    trainer = make_trainer(flags=read_flags({"STRICT_TRAJ_KEYS": "0", "PPO_RECORD_AT_SAMPLE": "0"}))
    batch = _generation_batch(trainer, task_rows)
    batch["old_log_probs"] = torch.zeros_like(batch["completion_mask"], dtype=torch.float32)
    trainer.current_gradient_accumulation_steps = 1  # set by the training loop; we call the loss directly
    trainer.compute_loss(trainer.model, batch)
    assert trainer._metrics["train"]["trajectory/unknown_keys"] == [1.0]
    assert "old_log_probs" in caplog.text


def test_logp_check_logs_gap(make_trainer):
    trainer = make_trainer(logp_check_steps=1, max_steps=1, temperature=0.9)
    trainer.train()
    log = trainer.state.log_history[0]
    assert 0.0 <= log["sampling/logp_abs_diff"] < 1e-4
    assert log["sampling/logp_abs_diff_max"] >= log["sampling/logp_abs_diff"]


def test_unscorable_sampled_tokens_stay_out_of_the_loss_and_are_counted(make_trainer, task_rows):
    """vLLM reports a token it could not score as None, which TRL turns into NaN: never read as 0."""
    trainer = make_trainer()
    batch = _generation_batch(trainer, task_rows)
    batch["old_per_token_logps"] = batch["old_per_token_logps"].clone()
    batch["old_per_token_logps"][0, 0] = float("nan")
    batch["old_per_token_logps"][1, 1] = float("nan")
    trainer.current_gradient_accumulation_steps = 1
    loss = trainer.compute_loss(trainer.model, batch)
    assert torch.isfinite(loss)
    assert trainer._metrics["train"]["sampling/logp_nan_tokens"] == [2]
    assert batch["tool_mask"][0, 0] == 0 and batch["tool_mask"][1, 1] == 0
    assert batch["tool_mask"].sum() == batch["tool_mask"].numel() - 2


@pytest.mark.gpu
def test_vllm_colocate_records_logps_that_match_the_trainer(make_trainer):
    pytest.importorskip("vllm")
    trainer = make_trainer(
        use_vllm=True, vllm_mode="colocate", vllm_gpu_memory_utilization=0.2, use_cpu=False,
        logp_check_steps=1, max_steps=2, num_iterations=2, temperature=0.8,
    )  # fmt: skip
    trainer.train()
    first = trainer.state.log_history[0]
    assert first["sampling/logp_abs_diff"] < 1e-2  # vLLM's kernels differ from the trainer's in the last digits
    assert abs(first["ratio/mean"] - 1.0) < 1e-2
