"""The intervention environment: a TRL `environment_factory` class whose tools sample a seeded SCM.

TRL constructs the class with no arguments (its settings come with it: `environment_settings`), calls `reset(**row)`
before each rollout (the returned text is appended to the prompt's last user message) and exposes every public method
but `reset`/`get_reward` as a tool, its JSON schema read from the type hints and the docstring. So the class has three
public methods, the tools: `intervene(variable, value)`, `choose(option)` (the intervention an option of the last
reply lists, by its number: the call a policy makes by reading the options, whatever the variables are called) and
`observe()`; everything else is private, a property or a class method.

Every call that samples the SCM (an intervention, or an observation of `OBSERVE_ROWS` rows) uses one unit of the
episode budget (the row's: `row_schema`) and updates the surrogate at once (unless frozen: a frozen surrogate learns
from the initial rows only): the reply is the target's sampled value, the calls left, and the options after those rows
(`belief`: per candidate call, its expected improvement, expected information gain, whether it reaches a new cell, and
P(parent of the target); no weighing of them). Reset's text gives the budget, a short summary of the initial rows
(`replies.data_summary`) and the options after them. The reply does not grow with the number of variables. A call the
environment refuses (unknown variable, the target, a value that is not a number, not finite or outside the variable's
range, an option number the last reply did not list, or a call past the budget) is answered with an ``error: ...``
string and counted under its kind; it samples nothing, updates nothing and uses no budget. Every call joins the episode's
trace (`episode_traces`); `episode_metrics` (a property, so not a tool) returns the episode's logged metrics.
"""

from __future__ import annotations

import numpy as np

from training.evaluation.pairing_seeds import generator
from training.run_setup.environment_settings import configured_environment
from training.tasks.causal.belief import Belief, belief_rng, shown_choices
from training.tasks.causal.choice_terms import offered_choices
from training.tasks.causal.episode_traces import EpisodeTrace, CallTrace
from training.tasks.causal.lookahead import intervention_mask, look_ahead
from training.tasks.causal.replies import data_summary, format_target
from training.tasks.causal.reward_components import step_rewards
from training.tasks.causal.row_schema import EpisodeError, check_row, named_rows, row_episode
from training.tasks.causal.scm.scm import SCM, InterventionError
from training.tasks.causal.shared_work import SHARED
from training.tasks.causal.surrogates.catalogue import SURROGATES as SURROGATE_KINDS
from training.tasks.causal.surrogates.catalogue import build_surrogate, check_surrogate_fits
from training.tasks.causal.surrogates.surrogate import ParentPosterior
from training.tool_use.choices import Choice

OBSERVE_ROWS = 3


class CausalEnv:
    """One episode of interventions on a seeded SCM (see module docstring). Its settings (a recipe's
    `environment_settings`): `surrogate_kind`, a registered surrogate's name (`surrogates.catalogue`; "exact" the
    linear-Gaussian one, "additive" the nonlinear one, "learned", "noop"), and `active` (False: the surrogate is frozen
    after the initial rows, never updated by a call)."""

    def __init__(self, surrogate_kind: str = "exact", active: bool = True):
        if surrogate_kind not in SURROGATE_KINDS:  # the live registry: a surrogate module added later counts
            raise ValueError(f"surrogate_kind: must be one of {list(SURROGATE_KINDS)}, got {surrogate_kind!r}")
        if not isinstance(active, bool):
            raise ValueError(f"active: must be a bool, got {active!r}")
        self.surrogate_kind, self.active = surrogate_kind, active
        self.scm: SCM | None = None
        self._surrogate = None
        self._trace: EpisodeTrace | None = None
        self._rng: np.random.Generator | None = None
        self._last_posterior: ParentPosterior | None = None
        self._last_entropy: float | None = None
        self._belief: Belief | None = None
        self._state: tuple = ()  # what this episode's state is a function of (shared_work.py)

    @property
    def trace(self) -> EpisodeTrace | None:
        return self._trace

    @property
    def surrogate(self):
        return self._surrogate

    @property
    def episode_metrics(self) -> dict[str, float]:
        """The episode's logged metrics (`causal/*`, `surrogate/updates`, `tools/*`), as batch means. Not a tool."""
        return self.trace.metrics()

    @property
    def call_rewards(self) -> list[dict[str, float]]:
        """Each call's reward terms, by component (= reward function) name, in the order the calls were answered
        (`reward_components.step_rewards`; they sum to the episode's rewards): what `call_credit` credits each call
        with. A property, not a tool."""
        return step_rewards(self.trace)

    @property
    def state_key(self) -> tuple:
        """The episode's state (training/tool_use/state_keys.py): its row, the environment's settings and the valid
        calls so far, of which every later answer is a function (`shared_work`). A property, not a tool."""
        return self._state

    @property
    def choices(self) -> list[Choice]:
        """`choose(option=k)` for each option the last reply listed, with the reward terms it would earn if made now
        (`choice_terms`): what choice credit weighs the options by. A property, not a tool."""
        return offered_choices(self)

    @property
    def belief(self) -> Belief | None:
        """The belief the last reply showed (reset's, or the last valid call's); a property, not a tool."""
        return self._belief

    def reset(self, **row) -> str:
        """Start an episode on the row's SCM (`row_schema`: its SCM, seed, budget, initial samples and in-degree
        bound); returns the budget, a short summary of the initial data and the options after it."""
        episode = row_episode(row)
        self.scm, budget, initial = episode.scm, episode.budget, episode.initial_samples
        self._rng = generator(episode.seed)  # the seed rule: training.evaluation.pairing_seeds
        self._seed = episode.seed
        self._state = (self.surrogate_kind, self.active, episode.scm_id, self._seed, budget, initial,
                       episode.max_parents)
        self._surrogate = build_surrogate(self.surrogate_kind, self.scm.variables, self.scm.target, episode.max_parents)
        rows = self.scm.sample(initial, self._rng)
        if initial:  # frozen too: the ablation holds the belief still, it does not take it away
            self._surrogate.update(rows, np.zeros_like(rows, dtype=bool))
        self._last_posterior, self._last_entropy = self._surrogate.posterior(), self._surrogate.entropy()
        self._trace = EpisodeTrace(self.scm, budget, self._last_entropy, self.scm.expected_target(),
                                   self.scm.optimum().expected, initial_posterior=self._last_posterior)
        self._sync_trace()
        self._trace.reset_text = f"{data_summary(self.scm, rows, budget)} {self._read_belief()}"
        return self._trace.reset_text

    @classmethod
    def prepare_rows(cls, rows: list[dict]) -> list[dict]:
        """The rows, each naming its SCM (`row_schema.named_rows`), as training and every evaluation hand them over
        (`recipe.setup_environment`). Not a tool."""
        return named_rows(rows)

    @classmethod
    def check_row(cls, row: dict, surrogate_kind: str = "exact", **settings) -> None:
        """Everything `reset` would refuse about `row` (`row_schema.check_row`), its size and in-degree bound for the
        surrogate too, before any work (`input_checks` calls it for every train and held-out row). Not a tool."""
        check_surrogate_fits(surrogate_kind, check_row(row).d, row.get("max_parents"))

    # ---- tools ----------------------------------------------------------------------------------------------------
    # Docstrings are the tool schemas in the model's prompt: kept terse, the tiny model's context is 1024 tokens.
    def intervene(self, variable: str, value: float) -> str:
        """Set a variable and sample all variables.

        Args:
            variable: name, e.g. X1
            value: value within its range
        """
        args = {"variable": variable, "value": value}
        if self._refuse_past_budget("intervene", args):
            return self._trace.steps[-1].outcome
        try:
            var, val = self.scm.check_intervention(variable, value)
        except InterventionError as err:
            return self._refuse("intervene", args, err.kind, str(err))
        return self._do("intervene", args, var, val)

    def choose(self, option: int) -> str:
        """Make one of the options the last reply listed: set its variable to its value and sample all variables.

        Args:
            option: its number in the list
        """
        args = {"option": option}
        if self._refuse_past_budget("choose", args):
            return self._trace.steps[-1].outcome
        options = self._belief.options if self._belief is not None and self._belief.known else ()
        if isinstance(option, bool) or not isinstance(option, (int, np.integer)) or not 1 <= option <= len(options):
            shown = f"1 to {len(options)}" if options else "none (the effects are unknown: observe)"
            return self._refuse("choose", args, "unknown_option", f"option must be the number of one the last reply "
                                f"listed ({shown}), got {option!r}")
        chosen = options[int(option) - 1]
        return self._do("choose", args, chosen.variable, chosen.value)

    def observe(self) -> str:
        """Sample all variables without intervening."""
        if self._refuse_past_budget("observe", {}):
            return self._trace.steps[-1].outcome
        rows = self.scm.sample(OBSERVE_ROWS, self._rng)
        return self._accept("observe", {}, rows, np.zeros_like(rows, dtype=bool), None, None)

    # ---- bookkeeping ----------------------------------------------------------------------------------------------
    def _do(self, tool: str, args: dict, var: str, val: float) -> str:
        """Sample one row under the checked do(var = val) and answer it."""
        rows = self.scm.sample(1, self._rng, {var: val})
        return self._accept(tool, args, rows, intervention_mask(self.scm, var), self.scm.expected_target({var: val}), (var, val))

    def _refuse_past_budget(self, tool: str, args: dict) -> bool:
        if self._trace is None:
            raise EpisodeError(f"{tool} called before reset")
        if self._trace.used < self._trace.budget:
            return False
        self._refuse(tool, args, "budget_exceeded", f"budget of {self._trace.budget} calls used up")
        return True

    def _refuse(self, tool: str, args: dict, kind: str, message: str) -> str:
        self._trace.invalid[kind] += 1
        self._trace.steps.append(CallTrace(tool, args, valid=False, outcome=f"error: {message}", error_kind=kind,
                                           **shown_choices(self._belief)))
        return f"error: {message}"

    def _accept(self, tool: str, args: dict, rows: np.ndarray, mask: np.ndarray, expected: float | None,
                intervention: tuple[str, float] | None) -> str:
        left = self._trace.budget - self._trace.used - 1
        sampled = rows[:, self.scm.index[self.scm.target]]
        text = f"{format_target(self.scm.target, sampled)} ({left} calls left)"
        step = CallTrace(tool, args, True, text, target_value=float(sampled.mean()), expected_target=expected,
                         intervention=intervention, rows=rows, mask=mask, call_index=self._trace.used,
                         **shown_choices(self._belief))
        self._trace.steps.append(step)
        step.regret = self._trace.regret
        self._learn(step)
        self._state = (*self._state, intervention or tool)
        step.outcome = text = f"{text}\n{self._read_belief()}"
        return text

    def _learn(self, step: CallTrace) -> None:
        """For an accepted call: its expected information gain, the surrogate's update with its rows, and the trace
        of what the update did (frozen: the trace only)."""
        if self.active:
            look_ahead(self._surrogate, self.scm, self._state, self._seed, step)  # the structure reward's gain
            self._surrogate.update(step.rows, step.mask)
        self._settle(step)

    def _read_belief(self) -> str:
        """The options after the surrogate's current belief (`belief.py`), the reply's last line, kept as `belief`."""
        self._belief = SHARED.get(("belief", self._state), lambda: Belief.of(
            self._surrogate, self.scm, belief_rng(self._seed, self._surrogate.updates), budget=self._trace.budget,
            made=tuple(self._trace.interventions)))
        return self._belief.line()

    def _settle(self, step: CallTrace) -> None:
        """Record what the surrogate's update with `step.rows` did (after it; frozen: that nothing moved)."""
        step.posterior_before = self._last_posterior
        step.entropy_before = self._last_entropy
        self._last_posterior = step.posterior_after = self._surrogate.posterior()
        self._last_entropy = step.entropy_after = self._surrogate.entropy()
        step.info_gain = step.entropy_before - step.entropy_after
        if not self.active:  # a frozen surrogate learns nothing from a call, now or in expectation
            step.expected_info_gain = 0.0
        self._sync_trace()

    def _sync_trace(self) -> None:
        self._trace.final_posterior = self._last_posterior
        self._trace.surrogate_updates = self._surrogate.updates


def make_causal_env(surrogate: str = "exact", active: bool = True):
    """`CausalEnv`s with the `surrogate` kind, frozen where `active` is False, as `environment_settings` give them."""
    settings = {"surrogate_kind": surrogate, **({} if active else {"active": False})}
    return configured_environment(CausalEnv, settings, "make_causal_env")
