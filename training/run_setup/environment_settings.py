"""A recipe's `environment_settings`: keyword arguments of the environment class's constructor, so that one class
serves every variant (the causal task's surrogates, a frozen one) and a recipe names the variant, not an alias.

    environment_factory: training.tasks.causal.env.CausalEnv
    environment_settings: {surrogate_kind: additive, active: false}

`configured_environment` pairs the class with its settings (`ConfiguredEnvironment`): what TRL's
`environment_factory` calls, with no arguments, for each rollout's environment. Each key must be a keyword parameter
of the class's constructor; the constructor checks the values (one instance is made at once, so a bad value is
refused here), and the error names the setting. `recipe_fields` goes the other way: the two recipe fields that name a
factory (a configured class, or a plain one), what a run records when a command hands `training.train` the factory
itself; `environment_type` and `environment_setting` read a factory's class and one setting's value (its constructor's
default where the recipe gives none).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field

from training.errors import BadInputError


class EnvironmentSettingsError(BadInputError):
    """Settings the environment class does not take, or a value it refuses; the message names which."""


@dataclass(frozen=True)
class ConfiguredEnvironment:
    """An environment class and its settings: called with no arguments, a new environment so set."""

    environment: type
    settings: Mapping[str, object] = field(default_factory=dict)

    def __call__(self):
        return self.environment(**self.settings)


def settings_of(environment: type) -> list[str]:
    """The settings a class takes: its constructor's keyword parameters."""
    parameters = inspect.signature(environment.__init__).parameters.values()
    return sorted(p.name for p in parameters if p.name != "self"
                  and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.default is not p.empty)


def configured_environment(environment, settings: Mapping, what: str = "environment_settings") -> ConfiguredEnvironment:
    """`environment` with `settings` (module docstring): unknown keys and refused values named."""
    if not isinstance(environment, type):
        raise EnvironmentSettingsError(f"{what}: the environment_factory {environment!r} is not a class, so it has no "
                                       "settings")
    known = settings_of(environment)
    unknown = [k for k in settings if k not in known]
    if unknown:
        raise EnvironmentSettingsError(f"{what}: {unknown} are not settings of {environment.__name__}; its settings: "
                                       f"{known}")
    configured = ConfiguredEnvironment(environment, dict(settings))
    try:
        configured()
    except (TypeError, ValueError) as err:
        raise EnvironmentSettingsError(f"{what} {dict(settings)}: {err}") from None
    return configured


def environment_type(factory) -> type | None:
    """The class a factory makes (a configured class's, or the class itself); None for anything else."""
    if isinstance(factory, ConfiguredEnvironment):
        return factory.environment
    return factory if isinstance(factory, type) else None


def environment_setting(factory, name: str):
    """The value of setting `name` of a factory: its configured value, else its class constructor's default."""
    if isinstance(factory, ConfiguredEnvironment) and name in factory.settings:
        return factory.settings[name]
    return inspect.signature(environment_type(factory).__init__).parameters[name].default


def recipe_fields(factory) -> tuple[str, dict | None]:
    """(environment_factory, environment_settings) of a factory: a configured class and its settings, or a plain class
    and None."""
    environment = environment_type(factory)
    settings = dict(factory.settings) if isinstance(factory, ConfiguredEnvironment) else None
    return f"{environment.__module__}.{environment.__qualname__}", settings
