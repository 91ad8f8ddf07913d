"""A recipe's `environment_settings`: keyword arguments of the environment class's constructor. A setting the class
takes gets the value, one it does not take is named with the class's settings, a value the class refuses is named,
and the recipe key reaches TRL's factory (the causal task's surrogate and freezing, which replaced its class
aliases)."""

from __future__ import annotations

import pytest

from training.run_setup.config import ConfigError, StrictScriptArguments
from training.run_setup.environment_settings import (
    ConfiguredEnvironment,
    EnvironmentSettingsError,
    configured_environment,
    environment_setting,
    environment_type,
    recipe_fields,
    settings_of,
)


class Counter:
    def __init__(self, start: int = 0, step: int = 1, label: str = "counter"):
        if not isinstance(step, int) or step < 1:
            raise ValueError(f"step: must be an int >= 1, got {step!r}")
        self.start, self.step, self.label = start, step, label

    @property
    def doubled(self):
        return 2 * self.start

    def count(self, n: int) -> int:
        return self.start + n * self.step


def test_settings_are_constructor_keywords_and_the_factory_builds_with_no_arguments():
    assert settings_of(Counter) == ["label", "start", "step"]  # no methods, no properties
    made = configured_environment(Counter, {"start": 10, "step": 3})
    assert isinstance(made, ConfiguredEnvironment) and type(made()) is Counter and made().count(2) == 16
    assert Counter().count(2) == 2  # the class itself is unchanged
    assert environment_type(made) is Counter and environment_type(Counter) is Counter
    assert (environment_setting(made, "step"), environment_setting(made, "label")) == (3, "counter")
    assert recipe_fields(made) == (f"{__name__}.Counter", {"start": 10, "step": 3})
    assert recipe_fields(Counter) == (f"{__name__}.Counter", None)


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
    assert (factory().surrogate_kind, factory().active) == ("additive", False)
    with pytest.raises(EnvironmentSettingsError, match="surrogate_kind: must be one of .*got 'oracle'"):
        script.environment_settings = {"surrogate_kind": "oracle"}
        setup_environment(script, [], [])
