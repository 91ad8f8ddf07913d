"""A recipe's `environment_settings`: the environment class configured by its class attributes. A declared setting
takes the value, an undeclared one is named with the class's settings, a value the class refuses is named, and the
recipe key reaches TRL's factory (the causal task's surrogate and freezing, which replaced its class aliases)."""

from __future__ import annotations

import pytest

from training.run_setup.config import ConfigError, StrictScriptArguments
from training.run_setup.environment_settings import (
    EnvironmentSettingsError,
    configured_environment,
    settings_of,
)


class Counter:
    start = 0
    step = 1
    label: str = "counter"

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if not isinstance(cls.step, int) or cls.step < 1:
            raise ValueError(f"step: must be an int >= 1, got {cls.step!r}")

    @property
    def doubled(self):
        return 2 * self.start

    def count(self, n: int) -> int:
        return self.start + n * self.step


def test_declared_settings_become_class_attributes_of_a_subclass_the_factory_builds_with_no_arguments():
    assert settings_of(Counter) == ["label", "start", "step"]  # no methods, no properties
    made = configured_environment(Counter, {"start": 10, "step": 3})
    assert issubclass(made, Counter) and made is not Counter and made().count(2) == 16
    assert Counter().count(2) == 2  # the class itself is unchanged


def test_an_undeclared_setting_and_a_refused_value_are_named():
    with pytest.raises(EnvironmentSettingsError, match=r"\['stride', 'count'\] are not settings of Counter; its "
                                                       r"settings: \['label', 'start', 'step'\]"):
        configured_environment(Counter, {"stride": 2, "count": 1})
    with pytest.raises(EnvironmentSettingsError, match="step: must be an int >= 1, got 0"):
        configured_environment(Counter, {"step": 0})
    with pytest.raises(EnvironmentSettingsError, match="is not a class"):
        configured_environment(lambda: Counter(), {"step": 2})


def test_the_recipe_key_is_a_mapping_and_needs_an_environment():
    args = StrictScriptArguments(train_file="t.jsonl", environment_factory="m.C",
                                 environment_settings="{active: false}")
    assert args.environment_settings == {"active": False}
    with pytest.raises(ConfigError, match="environment_settings=.* must be a mapping"):
        StrictScriptArguments(train_file="t.jsonl", environment_factory="m.C", environment_settings="[1, 2]")
    with pytest.raises(ConfigError, match="without an environment_factory"):
        StrictScriptArguments(train_file="t.jsonl", environment_settings={"active": False})


def test_a_causal_recipe_names_its_surrogate_and_freezes_it_by_settings():
    from training.run_setup.recipe import parse_args, setup_environment

    script, _, _ = parse_args(["--config", "recipes/causal_cpu.yaml", "--environment_settings",
                               "{surrogate_kind: additive, active: false}"])
    factory, _, _ = setup_environment(script, [], [])
    assert (factory.surrogate_kind, factory.active) == ("additive", False)
    with pytest.raises(EnvironmentSettingsError, match="surrogate_kind: must be one of .*got 'oracle'"):
        script.environment_settings = {"surrogate_kind": "oracle"}
        setup_environment(script, [], [])
