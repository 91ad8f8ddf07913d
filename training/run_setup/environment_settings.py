"""A recipe's `environment_settings`: the environment class configured by its class attributes, so that one class
serves every variant (the causal task's surrogates, a frozen one) and a recipe names the variant, not an alias.

    environment_factory: training.tasks.causal.env.CausalEnv
    environment_settings: {surrogate_kind: additive, active: false}

`configured_environment` makes a subclass with the settings as class attributes (constructible with no arguments, as
TRL's `environment_factory` is called). Each key must be a public, non-callable attribute the class declares; a class
that checks its values in `__init_subclass__` refuses a bad one here, and the error names the setting.
`recipe_fields` goes the other way: the two recipe fields that name a class (a configured one, or a plain one), what
a run records when a command hands `training.train` the class itself.
"""

from __future__ import annotations

from training.errors import BadInputError


CONFIGURED = "_configured_from"  # on a configured class: (the class it configures, its settings)


class EnvironmentSettingsError(BadInputError):
    """Settings the environment class does not declare, or a value it refuses; the message names which."""


def settings_of(factory: type) -> list[str]:
    """The settings a class declares: its public class attributes that are neither methods nor properties."""
    names = {k for klass in factory.__mro__ if klass is not object for k in vars(klass)}
    return sorted(k for k in names if not k.startswith("_") and not callable(getattr(factory, k))
                  and not isinstance(getattr(factory, k, None), property)
                  and not any(isinstance(vars(c).get(k), property) for c in factory.__mro__))


def configured_environment(factory, settings: dict, what: str = "environment_settings") -> type:
    """A subclass of the class `factory` with `settings` as its class attributes (module docstring)."""
    if not isinstance(factory, type):
        raise EnvironmentSettingsError(f"{what}: the environment_factory {factory!r} is not a class, so it has no "
                                       "settings")
    known = settings_of(factory)
    unknown = [k for k in settings if k not in known]
    if unknown:
        raise EnvironmentSettingsError(f"{what}: {unknown} are not settings of {factory.__name__}; its settings: "
                                       f"{known}")
    name = "_".join([factory.__name__, *(f"{k}_{v}" for k, v in settings.items())])
    try:
        return type(name, (factory,), {**settings, "__doc__": factory.__doc__, "__module__": factory.__module__,
                                       CONFIGURED: (factory, dict(settings))})
    except (TypeError, ValueError) as err:
        raise EnvironmentSettingsError(f"{what} {settings}: {err}") from None


def recipe_fields(environment: type) -> tuple[str, dict | None]:
    """(environment_factory, environment_settings) of a class: the class `configured_environment` configured and its
    settings, or a plain class and None."""
    factory, settings = vars(environment).get(CONFIGURED, (environment, None))
    return f"{factory.__module__}.{factory.__qualname__}", settings
