"""The policy registry: the shipped names in the order the commands print them, a name taken twice refused, a policy
module dropped into the package found without editing any other file, and every registered policy playing an
episode."""

from __future__ import annotations

import importlib
import uuid
from pathlib import Path

import pytest

from tests.tasks.causal.helpers import chain5, dropped_module
from training.tasks.causal.policies import policy_catalogue, policy_registry
from training.tasks.causal.policies.play import run_policy
from training.tasks.causal.policies.policy_catalogue import POLICIES
from training.tasks.causal.policies.policy_registry import register_policy
from training.tasks.causal.policies.scripted import RandomPolicy
from training.tasks.causal.splits import scm_row

SHIPPED = ["random", "range_ends", "greedy_eig", "thompson", "expected_improvement", "belief_line", "rollout", "teacher",
           "oracle"]


def test_the_registry_holds_the_shipped_policies_in_their_order():
    assert list(POLICIES) == SHIPPED
    assert POLICIES is policy_registry.POLICIES


def test_a_second_factory_under_a_taken_name_is_refused_and_the_same_one_again_is_not():
    before = dict(POLICIES)
    with pytest.raises(ValueError, match="'random'"):
        register_policy("random", lambda: RandomPolicy(), order=10)
    with pytest.raises(ValueError, match="'random'"):
        register_policy("random", RandomPolicy, order=11)  # the same factory elsewhere in the order
    assert register_policy("random", RandomPolicy, order=10) is RandomPolicy  # a re-import registers it again
    assert POLICIES == before and list(POLICIES) == SHIPPED


def test_a_policy_module_dropped_into_the_package_is_found_by_the_catalogue():
    """One new file in training/tasks/causal/policies/ and nothing else: after the catalogue is imported again, its
    policies are in `POLICIES`, each where its `order` puts it (not where discovery met the module)."""
    tag = uuid.uuid4().hex[:12]
    module, late, early = f"zz_dropped_policy_{tag}", f"dropped_{tag}", f"dropped_early_{tag}"
    source = (
        "from training.tasks.causal.policies.policy_registry import register_policy\n"
        "from training.tasks.causal.policies.scripted import random_call\n\n\n"
        f"@register_policy({late!r}, order=1000)\n"
        "class DroppedPolicy:\n"
        "    def __call__(self, env, rng):\n"
        "        return random_call(env, rng)\n\n\n"
        f"register_policy({early!r}, DroppedPolicy, order=15)\n")
    folder = Path(policy_catalogue.__file__).parent
    try:
        with dropped_module(policy_catalogue.PACKAGE, folder, module, source) as full_name:
            assert late not in POLICIES
            importlib.reload(policy_catalogue)
            assert full_name in policy_catalogue.policy_modules()
            assert policy_catalogue.POLICIES is POLICIES
            assert list(POLICIES) == [SHIPPED[0], early, *SHIPPED[1:], late]
            record = run_policy(POLICIES[late](), scm_row(chain5(), seed=1, budget=2, initial_samples=20), 0)
            assert record.used == 2
    finally:
        for name in (late, early):
            POLICIES.pop(name, None)
            POLICIES.order.pop(name, None)
    assert list(POLICIES) == SHIPPED


@pytest.mark.parametrize("name", SHIPPED)
def test_every_registered_policy_plays_an_episode(name):
    row = scm_row(chain5(), seed=1, budget=3, initial_samples=20)
    record = run_policy(POLICIES[name](), row, 0)
    assert record.used == 3
    assert all(step.valid for step in record.steps), [step.outcome for step in record.steps]


def test_the_costly_policies_are_left_out_by_default_above_eight_variables_and_run_when_named(capsys):
    from training.tasks.causal.policy_episodes import supported_policies

    assert {"greedy_eig", "rollout"} <= set(supported_policies(None, "exact", 8))
    at_twelve = supported_policies(None, "exact", 12)
    assert "greedy_eig" not in at_twelve and "rollout" not in at_twelve and "belief_line" in at_twelve
    assert "rollout, greedy_eig left out: on SCMs of 12 variables" in capsys.readouterr().out
    assert supported_policies("greedy_eig,random", "exact", 12) == ["greedy_eig", "random"]
