"""The four components inside the trainer: a component weighted 0 changes neither the rewards nor the advantages
that TRL computes (they equal those of the other three alone); a non-finite or overflowing component is counted,
and stops the run naming it (strict) or is masked without zeroing its group's advantages (non-strict)."""

import math

import pytest
import torch

from tests.tasks.causal.trainer_support import build_causal_trainer, score
from training.features.reward_checks import NonFiniteRewardError
from training.tasks.causal import reward_funcs
from training.tasks.causal.reward_components import COMPONENTS, DEFAULT_WEIGHTS

FUNCS = dict(zip(COMPONENTS, reward_funcs.REWARD_FUNCS, strict=True))


@pytest.fixture(scope="module")
def four(tiny_model_dir, tmp_path_factory):
    """A trainer scoring with all four components."""
    return build_causal_trainer(str(tmp_path_factory.mktemp("all")), tiny_model_dir, list(FUNCS.values()),
                                [DEFAULT_WEIGHTS[c] for c in COMPONENTS])


def scored_with_weights(trainer, weights: list[float]) -> dict:
    trainer.reward_weights = torch.tensor(weights, dtype=torch.float32)
    return score(trainer)


@pytest.mark.parametrize("zeroed", COMPONENTS)
def test_a_component_weighted_zero_leaves_exactly_the_other_three(tiny_model_dir, tmp_path, four, zeroed):
    others = [c for c in COMPONENTS if c != zeroed]
    all_on = scored_with_weights(four, [DEFAULT_WEIGHTS[c] for c in COMPONENTS])
    with_zero = scored_with_weights(four, [0.0 if c == zeroed else DEFAULT_WEIGHTS[c] for c in COMPONENTS])
    without = score(build_causal_trainer(str(tmp_path), tiny_model_dir, [FUNCS[c] for c in others],
                                         [DEFAULT_WEIGHTS[c] for c in others]))
    torch.testing.assert_close(with_zero["sequence_rewards"], without["sequence_rewards"], rtol=0, atol=0)
    torch.testing.assert_close(with_zero["advantages"], without["advantages"], rtol=0, atol=0)
    # and the component did matter with its weight on: the batch is not one where it happens to be constant
    assert not torch.equal(all_on["advantages"], with_zero["advantages"])


def overriding(name: str, value: float):
    """Component `name`, except that rollout 0 gets `value`."""
    def reward(**kwargs):
        values = FUNCS[name](**kwargs)
        values[0] = value
        return values
    reward.__name__ = name
    return reward


def funcs_with(name: str, value: float) -> list:
    return [overriding(c, value) if c == name else FUNCS[c] for c in COMPONENTS]


WEIGHTS = [DEFAULT_WEIGHTS[c] for c in COMPONENTS]


def test_an_infinite_component_is_counted_and_masked_not_trained_on_as_zero_advantages(tiny_model_dir, tmp_path):
    trainer = build_causal_trainer(str(tmp_path), tiny_model_dir, funcs_with("structure", math.inf), WEIGHTS,
                                   strict_health=False)
    batch = score(trainer)
    metrics = trainer._metrics["train"]
    assert metrics["rewards/nonfinite_count"][-1] == 1.0 and metrics["rewards/structure/nonfinite_count"][-1] == 1.0
    assert metrics["rewards/optimization/nonfinite_count"][-1] == 0.0
    group = batch["advantages"][:4]
    assert torch.isfinite(group).all() and group.abs().sum() > 0  # the group still trains, on the finite parts


def test_overflowing_component_stops_a_strict_run_naming_it(tiny_model_dir, tmp_path):
    trainer = build_causal_trainer(str(tmp_path), tiny_model_dir, funcs_with("parent", 1e30), WEIGHTS)
    with pytest.raises(NonFiniteRewardError, match=r"reward function 'parent' returned 1(\.0+)?e\+30 for completion 0"):
        score(trainer)


def test_overflowing_component_is_masked_in_a_lenient_run(tiny_model_dir, tmp_path):
    trainer = build_causal_trainer(str(tmp_path), tiny_model_dir, funcs_with("optimization", 1e30), WEIGHTS,
                                   strict_health=False)
    batch = score(trainer)
    metrics = trainer._metrics["train"]
    assert metrics["rewards/optimization/nonfinite_count"][-1] == 1.0
    assert torch.isfinite(batch["sequence_rewards"]).all() and batch["sequence_rewards"].abs().max() < 10
    group = batch["advantages"][:4]
    assert torch.isfinite(group).all() and group.abs().sum() > 0  # not the all-zero advantages of an inf std
