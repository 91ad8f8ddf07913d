"""A turn ends at its call's closing token (training/tool_use/turn_end.py), in a real GRPO step and in the held-out
loop: the causal starting policy writes its calls, and with `<|im_end|>` never sampled (a hook on the output layer)
its calls still end their turns, the tail appended out of the loss; without `end_turn_at_call` the same turns run on
to the limit and every one is void."""

from __future__ import annotations

import math

from tests.tasks.causal.trainer_support import build_sampled_causal_trainer, score
from training.algorithms.trajectory import loss_mask
from training.evaluation.episode_settings import EpisodeSettings
from training.run_setup.flags import StrictFlags
from training.tasks.causal.env import CausalEnv
from training.tasks.causal.policy_episodes import causal_reset
from training.tasks.causal.starting_policy import STARTING_POLICY_DIR
from training.evaluation.tool_loop import play_episodes

FLAGS = StrictFlags(force_rate=0.0, assist_warmup=0, rl_disable_forced=True, ppo_record_at_sample=True,
                    strict_traj_keys=True)
EPISODE = dict(max_completion_length=400, max_tool_calling_iterations=2, max_tool_calls_per_episode=3,
               max_turn_tokens=24)


def never_end_of_turn(model, im_end: int):
    def hook(module, inputs, output):
        out = output.clone()
        out[..., im_end] = -math.inf
        return out

    return model.get_output_embeddings().register_forward_hook(hook)


def test_a_call_ends_its_turn_without_sampling_the_end_of_turn_token(tmp_path):
    trainer = build_sampled_causal_trainer(str(tmp_path / "on"), str(STARTING_POLICY_DIR), FLAGS, **EPISODE)
    spec = trainer.turn_limits.spec
    (im_end,) = spec.tail
    handle = never_end_of_turn(trainer.model, im_end)
    try:
        batch = score(trainer)
        settings = EpisodeSettings.from_trainer(trainer, seed=0).greedy()
        rows = [dict(r) for r in trainer.train_dataset.to_list()[:2]]
        played = play_episodes(trainer.model, trainer.processing_class, rows, CausalEnv, settings,
                               reset=causal_reset)
    finally:
        handle.remove()
    metrics = trainer._metrics["train"]
    assert metrics["turns/cut"][-1] == 0.0 and metrics["tools/valid_calls"][-1] > 1.0  # calls went through
    ids, mask, tool_mask = batch["completion_ids"], batch["completion_mask"], batch["tool_mask"]
    logps = batch["sampling_per_token_logps"]
    closes = (ids == spec.call_close) & mask.bool()
    assert closes.sum() >= 2 * ids.size(0)  # every episode made its calls, turn after turn
    for row, col in closes.nonzero().tolist():
        assert ids[row, col + 1] == im_end  # the tail follows the closing token ...
        assert tool_mask[row, col + 1] == 0 and logps[row, col + 1] == 0.0  # ... appended: out of the loss
        assert tool_mask[row, col] == 1 and logps[row, col] < 0.0  # the closing token itself was sampled
    assert loss_mask(batch).sum() > 0
    # the held-out loop ends its turns the same way
    for ep in played:
        turns_ids = ep.completion_ids
        ends = [n for n, t in enumerate(turns_ids) if t == spec.call_close]
        assert len(ends) >= 2 and all(turns_ids[n + 1] == im_end for n in ends)
        assert len(ep.env.trace.steps) >= 2  # the environment answered the calls

    off = build_sampled_causal_trainer(str(tmp_path / "off"), str(STARTING_POLICY_DIR), FLAGS,
                                       end_turn_at_call=False, **EPISODE)
    handle = never_end_of_turn(off.model, im_end)
    try:
        score(off)
    finally:
        handle.remove()
    off_metrics = off._metrics["train"]
    assert off_metrics["turns/cut"][-1] == off_metrics["turns/void"][-1] == off_metrics["turns/count"][-1]
