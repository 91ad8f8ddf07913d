"""Short reward names in recipes: registered entry points resolve to the same functions as their dotted paths."""

import pytest
import yaml

from training.run_setup.reward_names import UnknownRewardName, dotted_path, registered
from training.tasks.causal import reward_funcs
from training.train import import_reward


def test_every_registered_name_imports_the_function_it_names():
    names = registered()
    assert {"optimization", "structure", "parent", "exploration", "exact_answer_reward"} <= set(names)
    for name, path in names.items():
        assert import_reward(name) is import_reward(path)
        assert callable(import_reward(name))


def test_the_causal_recipe_names_its_four_components_by_short_name():
    recipe = yaml.safe_load(open("recipes/causal_cpu.yaml"))
    assert recipe["reward_funcs"] == ["optimization", "structure", "parent", "exploration"]
    assert [import_reward(n) for n in recipe["reward_funcs"]] == list(reward_funcs.REWARD_FUNCS)


def test_dotted_paths_pass_through_and_unknown_names_are_refused_with_the_known_ones():
    assert dotted_path("training.tasks.larger_number.rewards.exact_answer_reward") == "training.tasks.larger_number.rewards.exact_answer_reward"
    with pytest.raises(UnknownRewardName, match=r"did you mean structure\?.*registered: .*exploration"):
        dotted_path("structur")
