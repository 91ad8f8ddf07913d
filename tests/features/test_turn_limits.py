"""Turn limits in a real GRPO step and in the held-out loop (training/features/turn_limits.py): a turn that would run
on is cut at `max_turn_tokens` in both alike, a void turn's episode leaves the loss under `void_turn_rule: exclude`,
vLLM's requests carry the turn's limit and stop token, and a recipe field that cannot apply is refused by name.

The tiny model is steered with a hook on its output layer (`steer`): it is active in the sampler, the held-out loop
and the loss forward alike, so sampled and trained log-probs stay the same distribution."""

from __future__ import annotations

import math
import pytest
from training.algorithms.trajectory import loss_mask
from training.evaluation.episode_settings import EpisodeSettings
from training.evaluation.tool_loop import play_episodes
from training.features.turn_limits import TurnLimitError, TurnLimits, appended_masked
from training.tasks.workspace.env import WorkspaceEnv
from training.tool_use.turn_end import TurnEnd


def steer(model, rule):
    """A forward hook on `model`'s output layer: `rule(logits)` edits the logits (rows: the batch)."""
    def hook(module, inputs, output):
        out = output.clone()
        rule(out)
        return out

    return model.get_output_embeddings().register_forward_hook(hook)


def suppress(ids):
    def rule(logits):
        logits[..., ids] = -math.inf
    return rule


def generation_batch(trainer, rows):
    trainer.model.train()
    return trainer._generate_and_score_completions([dict(r) for r in rows for _ in range(trainer.num_generations)])


def test_a_turn_that_would_run_on_is_cut_at_the_limit_in_a_step_and_in_the_heldout_loop(make_env_trainer,
                                                                                        workspace_rows):
    trainer = make_env_trainer(max_turn_tokens=10)  # the episode's budget is 72
    handle = steer(trainer.model, suppress(trainer.turn_limits.spec.sampler_stops))  # no turn can end
    try:
        batch = generation_batch(trainer, workspace_rows[:2])
        settings = EpisodeSettings.from_trainer(trainer, seed=0)
        played = play_episodes(trainer.model, trainer.processing_class, workspace_rows[:2], WorkspaceEnv, settings)
    finally:
        handle.remove()
    # training: the sampler itself stops at the limit (no token past it is generated, then thrown away) ...
    assert trainer.generation_config.max_new_tokens == trainer.generation_kwargs["max_new_tokens"] == 10
    # ... and one turn per episode (no call), cut at 10 tokens, not at the budget
    assert batch["completion_mask"].sum(dim=1).tolist() == [10] * 4
    metrics = trainer._metrics["train"]
    assert metrics["turns/cut"][-1] == metrics["turns/count"][-1] == 4.0
    assert metrics["turns/max_tokens"][-1] == 10.0 and metrics["turns/limit"][-1] == 10.0
    # the held-out loop: the same limit from the same field
    assert settings.max_turn_tokens == 10 and len(played) == 2 * settings.episodes_per_row
    assert [len(ep.completion_ids) for ep in played] == [10] * len(played)


def test_the_void_turn_rule_keeps_void_episodes_out_of_the_loss_of_a_step(make_env_trainer, workspace_rows,
                                                                          tmp_path):
    """Rows 0 and 2 answer at once (EOS forced: a well-formed turn); rows 1 and 3 cannot end and are cut at the limit
    (void). Under `exclude` the void rows have no token in the loss, the loss is the well-formed rows' alone, divided
by all 18 sampled tokens (a mostly void batch takes a small step); under
    `credit` (the rule off) they stay in and the loss differs."""
    def rule(logits):
        eos = trainer.turn_limits.spec.stop_ids[0]
        logits[0::2, ..., eos] = 1e4
        logits[1::2, ..., list(trainer.turn_limits.spec.sampler_stops)] = -math.inf

    losses, masks, normalisers = {}, {}, {}
    for void_rule in ("exclude", "credit"):
        trainer = make_env_trainer(max_turn_tokens=8, void_turn_rule=void_rule, output_dir=str(tmp_path / void_rule))
        trainer.current_gradient_accumulation_steps = 1  # set by Trainer's training loop, not run here
        handle = steer(trainer.model, rule)
        try:
            batch = generation_batch(trainer, workspace_rows[:2])
            masks[void_rule] = loss_mask(batch).sum(dim=1).tolist()
            normalisers[void_rule] = int(batch["num_items_in_batch"])
            losses[void_rule] = trainer._compute_loss(trainer.model, batch).item()
        finally:
            handle.remove()
        assert trainer._metrics["train"]["turns/void_episodes"][-1] == 2.0
    assert masks["exclude"] == [1, 0, 1, 0]  # the answers' one token each; the void rows out
    assert masks["credit"] == [1, 8, 1, 8]
    # the void rows' tokens stay in the normaliser: the kept rows' step is 2/18 of a whole step, not all of it
    assert normalisers == {"exclude": 18, "credit": 18}
    assert math.isfinite(losses["exclude"]) and losses["exclude"] != pytest.approx(losses["credit"])


def test_vllm_requests_carry_the_turns_limit_and_stop_token(make_env_trainer):
    """TRL's own `VLLMGeneration.generate` (server mode, its client faked: no vLLM on CPU) sends `max_tokens` = the
    turn limit and `stop_token_ids` = the call's closing token, once the trainer configured it."""
    from trl.generation.vllm_generation import VLLMGeneration

    trainer = make_env_trainer(max_turn_tokens=12, generation_kwargs={"stop_token_ids": [7]})
    sent = {}

    class Client:
        def generate(self, prompts, features=None, **params):
            sent.update(params)
            return {"prompt_ids": prompts, "completion_ids": [[1, 2]] * len(prompts), "logprobs": [[[-0.1]] * 2]}

    vllm = object.__new__(VLLMGeneration)
    vllm.__dict__.update(mode="server", enable_sleep_mode=False, accelerator=trainer.accelerator, temperature=1.0,
                         top_p=1.0, top_k=0, min_p=None, repetition_penalty=1.0, max_completion_length=72,
                         logprobs=0, structured_outputs_regex=None, generation_kwargs={"stop_token_ids": [7]},
                         vllm_client=Client())
    trainer.turn_limits.configure_vllm(vllm)
    vllm.generate(prompts=[[5, 6]], images=None, num_generations=1)
    close = trainer.turn_limits.spec.call_close
    assert sent["max_tokens"] == 12 and sent["generation_kwargs"]["stop_token_ids"] == [7, close]


def test_turn_settings_that_cannot_apply_are_refused_by_name(make_trainer, tmp_path):
    with pytest.raises(TurnLimitError, match="max_turn_tokens=4 is set but the run has no tools"):
        make_trainer(max_turn_tokens=4)
    from training.run_setup.config import ConfigError, StrictGRPOConfig

    with pytest.raises(ConfigError, match="void_turn_rule='drop'"):
        StrictGRPOConfig(output_dir=str(tmp_path), void_turn_rule="drop")


def test_the_limit_in_force_is_logged_with_where_it_comes_from(make_env_trainer, caplog):
    with caplog.at_level("INFO", logger="training.features.turn_limits"):
        trainer = make_env_trainer()
    assert trainer.turn_limits.limit == 36  # min(256, 72 // 2): not the episode's budget
    assert "turn limit in force: 36 tokens a turn (the default min(256, max_completion_length // 2)" in caplog.text


def test_sampled_logprobs_of_appended_tokens_are_never_read():
    """The appended tail's placeholder log-prob is 0 (a turn's sampled tokens keep theirs); its `tool_mask` is 0, so
    the loss masks it like a tool result's tokens."""
    limits = object.__new__(TurnLimits)
    limits.__dict__.update(enabled=True, rule="exclude",
                           spec=TurnEnd(limit=5, stop_ids=(2,), call_open=3, call_close=4, tail=(2,)))
    ids, logps = limits.finish([[3, 9, 4, 0, 0], [7, 7, 7, 7, 7, 7]], [[-1.0, -2.0, -3.0, -4.0, -5.0], [-0.5] * 6])
    assert ids == [[3, 9, 4, 2], [7, 7, 7, 7, 7]]
    assert logps == [[-1.0, -2.0, -3.0, 0.0], [-0.5] * 5]
    assert appended_masked([3, 9, 4, 2, 60, 61], [1, 1, 1, 1, 0, 0], limits.spec) == [1, 1, 1, 0, 0, 0]
