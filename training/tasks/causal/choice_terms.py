"""What each option the causal environment's last reply listed would earn if chosen now (`CausalEnv.choices`): the
reward terms, by component, that `call_rewards` would then hold for `choose(option=k)`, the same sampled row,
lookahead and surrogate update, worked out on copies so that the episode is left as it is. What choice credit weighs
the options by (training/tool_use/choices.py). The environment's what-if half: it reads the environment's private
state and never writes it."""

from __future__ import annotations

import copy

from training.tasks.causal.episode_traces import CallTrace
from training.tasks.causal.lookahead import intervention_mask, look_ahead, look_ahead_together
from training.tasks.causal.reward_components import STEP_COMPONENTS, Step
from training.tasks.causal.row_schema import EpisodeError
from training.tasks.causal.shared_work import SHARED
from training.tool_use.choices import Choice


def offered_choices(env) -> list[Choice]:
    """`choose(option=k)` for each option of `env`'s last reply, with its terms (`Choice.terms()`), worked out once a
    process per state (`shared_work`) and refused if read after the episode moved on. Empty where no option is listed
    (the effects unknown) or the budget is spent."""
    trace, belief = env.trace, env.belief
    if belief is None or not belief.known or trace.used >= trace.budget:
        return []
    options, state = belief.options, env.state_key

    def every() -> list[dict[str, float]]:  # one computation for all the choices of the state
        if env.state_key != state:
            raise EpisodeError("choices: their terms were read after the episode moved on (read them before the "
                               "next call)")
        return SHARED.get(("choices", state), lambda: _what_ifs(env, [(o.variable, o.value) for o in options]))

    return [Choice({"name": "choose", "arguments": {"option": k}}, lambda k=k: every()[k - 1])
            for k in range(1, len(options) + 1)]


def _what_ifs(env, calls: list[tuple[str, float]]) -> list[dict[str, float]]:
    if env.active:
        look_ahead_together(env.surrogate, env.scm, env.state_key, env._seed, env.trace.used, calls)
    return [_what_if(env, var, val) for var, val in calls]


def _what_if(env, var: str, val: float) -> dict[str, float]:
    """The reward terms of do(var = val) made now, on copies of the sampler and the surrogate."""
    rows = env.scm.sample(1, copy.deepcopy(env._rng), {var: val})
    mask = intervention_mask(env.scm, var)
    step = CallTrace("choose", {}, True, "", rows=rows, mask=mask, intervention=(var, val), call_index=env.trace.used)
    before = env._last_posterior
    after, gain = before, 0.0
    if env.active:
        look_ahead(env.surrogate, env.scm, env.state_key, env._seed, step)
        surrogate = copy.deepcopy(env.surrogate)
        surrogate.update(rows, mask)
        after, gain = surrogate.posterior(), step.expected_info_gain
    made = Step(env.scm, before, after, (var, val), rows, tuple(env.trace.interventions), env.trace.budget, gain)
    return {name: fn(made) for name, fn in STEP_COMPONENTS.items()}
