"""Short reward names in recipes: each task's names resolve to its `Task`'s functions, the judges' to their objects,
the same as their dotted paths; unknown names are refused with the known ones."""

import pytest
import yaml

from training.run_setup import tasks
from training.run_setup.reward_names import JUDGE_REWARDS, UnknownRewardName, registered, reward_object
from training.tasks.causal import reward_funcs
from training.train import import_reward


def test_every_short_name_is_a_tasks_reward_or_a_judges_and_resolves_as_its_dotted_path():
    assert {"optimization", "structure", "parent", "exploration", "exact_answer_reward",
            "reference_tool_call_reward", "exact_match_reward"} <= set(registered())
    for task in tasks.all():
        for name, func in task.rewards.items():
            assert import_reward(name) is func
            assert import_reward(f"{func.__module__}.{func.__qualname__}") is func
    for name, path in JUDGE_REWARDS.items():
        assert import_reward(name) is import_reward(path)
    assert set(registered()) == {name for t in tasks.all() for name in t.rewards} | set(JUDGE_REWARDS)


def test_the_causal_recipe_names_its_four_components_by_short_name():
    recipe = yaml.safe_load(open("recipes/causal_cpu.yaml"))
    assert recipe["reward_funcs"] == ["optimization", "structure", "parent", "exploration"]
    assert [import_reward(n) for n in recipe["reward_funcs"]] == list(reward_funcs.REWARD_FUNCS)


def test_dotted_paths_pass_through_and_unknown_names_are_refused_with_the_known_ones():
    from training.tasks.larger_number.rewards import exact_answer_reward

    assert reward_object("training.tasks.larger_number.rewards.exact_answer_reward") is exact_answer_reward
    with pytest.raises(UnknownRewardName, match=r"did you mean structure\?.*registered: .*exploration"):
        reward_object("structur")
