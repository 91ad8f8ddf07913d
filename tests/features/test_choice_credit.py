"""`choice_credit` in a real GRPO step: the causal starting policy's `choose(option=k)` turns are decisions at the
option's number token; that token's term is exactly the expected policy gradient over the offered options (checked
against TRL's own loss, option by option), its sampled advantage is the later calls' credit, and what the feature
needs is refused by name."""

from __future__ import annotations

import pytest
import torch

from tests.features.test_call_credit import EPISODE, FLAGS
from tests.tasks.causal.trainer_support import build_sampled_causal_trainer, score
from training.algorithms.turn_advantages import token_advantages, token_turns, turn_advantages
from training.features.choice_credit import ChoiceCreditError
from training.features.forcing import tool_call_text
from training.run_setup.config import ConfigError, StrictGRPOConfig
from training.tasks.causal.env import CausalEnv
from training.tasks.causal.starting_policy import STARTING_POLICY_DIR
from training.tool_use.choices import Choice

OFF = -1


def trainer(tmp_path, **overrides):
    t = build_sampled_causal_trainer(str(tmp_path), str(STARTING_POLICY_DIR), FLAGS, call_credit=True,
                                     choice_credit=True, **{**EPISODE, **overrides})
    t.current_gradient_accumulation_steps = 1  # what Trainer.train's loop sets
    return t


def decisions(batch) -> list[tuple[int, int]]:
    return [tuple(x) for x in (batch["choice_tokens"] >= 0).any(dim=-1).nonzero().tolist()]


def lora_grad(t, batch) -> torch.Tensor:
    t.model.zero_grad()
    t._compute_loss(t.model, {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in batch.items()}).backward()
    return torch.cat([p.grad.flatten() for p in t.model.parameters() if p.requires_grad and p.grad is not None])


@pytest.mark.parametrize("loss_type", ["dr_grpo", "dapo"])
def test_the_choice_term_is_the_expected_policy_gradient_over_the_offered_options(tmp_path, loss_type):
    t = trainer(tmp_path, loss_type=loss_type)
    batch = score(t)
    b, pos = next(d for d in decisions(batch) if int((batch["choice_tokens"][d] >= 0).sum()) >= 2)
    offered = batch["choice_tokens"][b, pos]
    n = int((offered >= 0).sum())
    values = batch["choice_values"][b, pos, :n]
    only = torch.full_like(batch["choice_tokens"], OFF)
    only[b, pos] = offered
    quiet = {**batch, "advantages": torch.zeros_like(batch["advantages"]), "choice_tokens": only}
    got = lora_grad(t, quiet)
    # the same gradient from TRL's loss: option o written at the choice token with advantage v_o - sum_o pi v (the
    # policy's expected value: the baseline under which the restricted and the full softmax give the same gradient),
    # weighed by pi(o)
    t.choice_credit.enabled = False
    with torch.no_grad():
        ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
        mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
        logits = t.model(input_ids=ids, attention_mask=mask).logits[b, batch["prompt_ids"].size(1) + pos - 1]
        pi = torch.softmax(logits[offered[:n]] / t.temperature, dim=0)
    centred = values - (pi * values).sum()
    expected = torch.zeros_like(got)
    for o in range(n):
        written = {**quiet, "completion_ids": batch["completion_ids"].clone(), "advantages": torch.zeros_like(
            batch["advantages"]), "choice_tokens": torch.full_like(only, OFF)}
        written["completion_ids"][b, pos] = offered[o]
        written["advantages"][b, pos] = centred[o]
        with torch.no_grad():
            written["old_per_token_logps"] = t._completion_logps(t.model, written)  # ratio 1: the plain gradient
        expected += pi[o] * lora_grad(t, written)
    assert got.abs().sum() > 0
    assert float((got - expected).norm() / expected.norm()) < 1e-4, float((got - expected).norm() / expected.norm())


def test_each_choice_token_carries_the_later_calls_credit_and_the_options_values(tmp_path):
    t = trainer(tmp_path)
    batch = score(t)
    found = decisions(batch)
    assert found and t._metrics["train"]["choice_credit/unmatched_turns"][-1] == 0.0
    tok = t.processing_class
    numbers = {k: tok(str(k), add_special_tokens=False)["input_ids"] for k in range(1, 6)}
    for b, pos in found:
        offered = batch["choice_tokens"][b, pos]
        n = int((offered >= 0).sum())
        assert offered[:n].tolist() == [numbers[k][-1] for k in range(1, n + 1)]  # the option's number token
        assert batch["completion_ids"][b, pos] in offered[:n]  # the sampled choice is one of them
        assert abs(float(batch["choice_values"][b, pos, :n].sum())) < 1e-5  # centred over the offered options
        text = tok.decode(batch["completion_ids"][b, : pos + 1])
        assert text.endswith(tool_call_text("choose", {"option": 0})[:-len('0}}\n</tool_call>')] + tok.decode(
            batch["completion_ids"][b, pos : pos + 1]))
    # the other tokens keep call_credit's advantage; the choice token has the later calls' credit
    turns = token_turns(batch["tool_mask"], batch["completion_mask"])
    assert (turns[[b for b, _ in found], [p for _, p in found]] >= 0).all()
    weights = dict(zip(t.reward_func_names, t.reward_weights.tolist(), strict=True))
    rewards = torch.zeros((batch["completion_ids"].size(0), int(turns.max()) + 1))
    for i, env in enumerate(t.environments):
        for k, terms in enumerate(env.call_rewards):
            rewards[i, k] = sum(w * terms[name] for name, w in weights.items())
    exists = (torch.arange(rewards.size(1)) <= turns.max(dim=1).values.unsqueeze(1)).float()
    groups = torch.arange(rewards.size(0)) // t.num_generations
    full = token_advantages(turn_advantages(rewards, exists, groups), turns)
    own = torch.zeros_like(rewards)
    for b, pos in found:
        own[b, turns[b, pos]] = 1.0
    later = turn_advantages(rewards, exists, groups, own_excluded=own)
    at = torch.zeros_like(full, dtype=torch.bool)
    at[[b for b, _ in found], [p for _, p in found]] = True
    assert torch.allclose(batch["advantages"][~at & (turns >= 0)], full[~at & (turns >= 0)], atol=1e-5)
    for b, pos in found:
        assert batch["advantages"][b, pos] == pytest.approx(later[b, turns[b, pos]].item(), abs=1e-5)


def test_the_environments_choices_earn_what_the_calls_earn():
    from training.run_setup.prompt_datasets import load_rows
    from training.tasks.causal.splits import DATA_DIR
    import copy

    env = CausalEnv()
    env.reset(**load_rows(DATA_DIR / "heldout.jsonl")[3])
    for _ in range(3):
        offered = env.choices
        assert [c.call for c in offered] == [{"name": "choose", "arguments": {"option": k}}
                                              for k in range(1, len(env.belief.options) + 1)]
        for k, choice in enumerate(offered, start=1):
            made = copy.deepcopy(env)
            made.choose(option=k)
            assert choice.terms() == made.call_rewards[-1]
        env.choose(option=1)
    with pytest.raises(ValueError, match="read after the episode moved on"):
        offered[0].terms()


def test_what_choice_credit_needs_is_refused_by_name(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="choice_credit=true credits the later calls' return by call_credit"):
        StrictGRPOConfig(output_dir=str(tmp_path), choice_credit=True)
    with pytest.raises(ConfigError, match="choice_credit and step_credit both re-credit the choice token"):
        StrictGRPOConfig(output_dir=str(tmp_path), choice_credit=True, call_credit=True, step_credit=True)
    with pytest.raises(ChoiceCreditError, match="loss_type dr_grpo, dapo, bnpo, grpo; got 'cispo'"):
        trainer(tmp_path / "cispo", loss_type="cispo")
    real = CausalEnv.choices.fget  # the options, and one call written otherwise
    monkeypatch.setattr(CausalEnv, "choices", property(lambda self: [*real(self), Choice(
        {"name": "intervene", "arguments": {"variable": "a", "value": 1.0}}, lambda: {})]))
    with pytest.raises(ChoiceCreditError, match="CausalEnv's choices are not written alike but for one token"):
        score(trainer(tmp_path / "unlike"))
    monkeypatch.delattr(CausalEnv, "choices")
    with pytest.raises(ChoiceCreditError, match="choice_credit: CausalEnv has no `choices` property"):
        score(trainer(tmp_path / "none"))
