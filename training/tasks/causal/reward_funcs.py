"""The causal job's four reward components as TRL reward functions.

Each is called by `GRPOTrainer` once per generation batch with `environments=[...]`, the `CausalEnv` instance of
every rollout (TRL passes them to every reward function of an `environment_factory` run), and returns one float per
rollout: that episode's component reward (`training.tasks.causal.reward_components.episode_rewards`). Their `__name__`s are exactly
`optimization`, `structure`, `parent`, `exploration`, so TRL logs `rewards/<name>/mean` and `rewards/<name>/std`
(the metric contract); the recipe weighs them with `reward_weights`, in this order (`COMPONENTS`'):

    reward_funcs: [training.tasks.causal.reward_funcs.optimization, training.tasks.causal.reward_funcs.structure,
                   training.tasks.causal.reward_funcs.parent, training.tasks.causal.reward_funcs.exploration]
    reward_weights: [1.0, 0.5, 0.3, 0.1]
"""

from __future__ import annotations

from training.tasks.causal.reward_components import COMPONENTS, episode_rewards


def _component(name: str):
    def reward(completions, environments=None, **kwargs) -> list[float]:
        if environments is None:
            raise ValueError(f"reward {name!r} reads the episodes from TRL's `environments` kwarg; run it with "
                             "environment_factory=training.tasks.causal.env.CausalEnv (or make_causal_env(...))")
        if len(environments) != len(completions):
            raise ValueError(f"reward {name!r}: {len(environments)} environments for {len(completions)} completions")
        for i, env in enumerate(environments):
            if not hasattr(env, "trace") or env.trace is None:
                raise ValueError(f"reward {name!r}: rollout {i}'s environment {type(env).__name__} has no causal "
                                 "episode trace (reset not called, or not a CausalEnv)")
        return [episode_rewards(env.trace)[name] for env in environments]

    reward.__name__ = reward.__qualname__ = name
    reward.__doc__ = f"The episode's `{name}` component (training.tasks.causal.reward_components), one float per rollout."
    return reward


# One TRL reward function per component, made from `COMPONENTS` (so a new component is written in
# reward_components.py alone; task.py registers each under its name): `reward_funcs.optimization`, ... by name.
REWARD_FUNCS = [_component(name) for name in COMPONENTS]
globals().update({f.__name__: f for f in REWARD_FUNCS})
