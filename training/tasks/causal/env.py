"""The intervention environment: a TRL `environment_factory` class whose tools sample a seeded SCM.

TRL constructs the class with no arguments, calls `reset(**row)` before each rollout (the returned text is appended
to the prompt's last user message) and exposes every public method except `reset`/`get_reward` as a tool, its JSON
schema read from the type hints and the docstring. So the class has exactly three public methods, the tools:
`intervene(variable, value)`, `choose(option)` (the intervention an option of the last reply lists, by its number:
the call a policy makes by reading the options, whatever the variables are called) and `observe()`; everything else
is private or an attribute.

Every call that samples the SCM (an intervention, or an observation of `OBSERVE_ROWS` rows) uses one unit of the
episode budget (row `budget`, default `DEFAULT_BUDGET`) and updates the surrogate at once (unless the class is
frozen: a frozen surrogate learns from the initial rows only, never from a call): the reply to the model is the
target's sampled value (one decimal; the whole rows are in the record), the calls left, and the options after those
rows (`training.tasks.causal.belief`: per candidate call, its expected improvement, expected information gain,
whether it reaches a new cell, and P(parent of the target); no weighing of them). Reset's text ends with the options
after the initial rows; a frozen surrogate's belief stays the one after them. The reply does not grow with the
number of variables, so an SCM of 12 variables reads like one of 4. A call the environment refuses (unknown
variable, the target, a value that is not a number, not finite or outside the variable's range, an option number the
last reply did not list, or a call past the budget) is answered with an ``error: ...`` string and counted under its
kind; it samples nothing, updates nothing and uses no budget.

Every call is recorded (`StepRecord`): the call, its validity, the text returned, the posterior entropy before and
after, the information gain (their difference), the target's sampled value and, for interventions, E[target | do]
and the regret after the call. Regret = optimum - best E[target | do] reached so far (mirrored for goal "min"),
where the best starts at E[target] without intervention and the result is clipped at 0. The EXPECTED value is used,
not the noisy sampled target: the policy controls which distribution it samples, not the noise, so rewarding the
sample would reward luck and make regret negative by chance; the expectation is exact for the linear family.

Rows (`training.tasks.causal.splits`): `scm_json`, `seed` (seeds the episode's sampling: the same row gives the same
samples and the same posterior trajectory for the same calls; a GRPO group shares a row and so shares its noise,
common random numbers across the group), optional `budget` and `initial_samples` (observational rows the surrogate
sees at reset, default `DEFAULT_INITIAL_SAMPLES`). Reset's text (appended by TRL to the prompt) gives the
budget, a short summary of the initial rows (the sample correlation of the target with every other variable,
`data_summary`) and the options (`belief.py`).

`episode_metrics` (a property, so TRL does not offer it as a tool) returns the episode's `causal/*` metrics,
`surrogate/updates`, the calls accepted (`tools/valid_calls`) and refused by kind (`tools/refused/<kind>`); the trainer
logs their batch means (training/features/environment_metrics.py), and `health/no_valid_calls` reads the last two.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from training.evaluation.pairing_seeds import LOOKAHEAD_SEED_KEY, generator
from training.tasks.causal.belief import Belief, belief_rng
from training.tasks.causal.reward_components import STEP_COMPONENTS, Step, step_rewards
from training.tasks.causal.scm.scm import SCM, InterventionError, SCMError
from training.tasks.causal.scm.scm_checks import check_scm
from training.tasks.causal.shared_work import SHARED
from training.tasks.causal.structure_metrics import parent_f1
from training.tasks.causal.surrogates.catalogue import SURROGATES as SURROGATE_KINDS
from training.tasks.causal.surrogates.subsets import parent_bound
from training.tasks.causal.surrogates.surrogate import ParentPosterior
from training.tool_use.choices import Choice

# The one default of every row, command and baseline (training.tasks.causal.splits, training.tasks.causal.scm_rows): 6 calls
# after 10 observational rows. A 6-call episode of the tiny Qwen3 is ~600 tokens; 20 would not fit its 1024-token
# context, and shorter episodes give each call's credit a clearer signal.
DEFAULT_BUDGET = 6
DEFAULT_INITIAL_SAMPLES = 10
OBSERVE_ROWS = 3
LOOKAHEAD_DRAWS = 16  # posterior models behind a call's expected information gain (the structure reward)
SURROGATES = tuple(SURROGATE_KINDS)  # the registered surrogates' names (`surrogates/catalogue.py`); "exact" is the default
SAMPLED_SURROGATES = tuple(name for name, kind in SURROGATE_KINDS.items() if kind.sampled)  # posteriors with draws:
# what the options, the baselines and the structure reward need
INVALID_KINDS = ("unknown_variable", "target_variable", "bad_value_type", "non_finite", "out_of_bounds",
                 "unknown_option", "budget_exceeded")
LOGGED_METRICS = ("causal/info_gain", "causal/posterior_entropy", "causal/regret", "causal/parent_f1",
                  "causal/invalid_calls", "surrogate/updates", "tools/valid_calls",
                  *(f"tools/refused/{kind}" for kind in INVALID_KINDS))  # `EpisodeRecord.metrics`, batch means


class EpisodeError(ValueError):
    """A row the environment cannot start an episode from; the message names the field."""


@dataclass
class StepRecord:
    tool: str
    arguments: dict
    valid: bool
    outcome: str
    error_kind: str | None = None
    entropy_before: float | None = None
    entropy_after: float | None = None
    info_gain: float = 0.0
    target_value: float | None = None  # the sampled target (mean of the rows for observe)
    expected_target: float | None = None  # E[target | do] (interventions only)
    regret: float | None = None  # after this call
    intervention: tuple[str, float] | None = None  # the checked do(variable = value); None for observe / refused
    rows: np.ndarray | None = None  # what the call sampled (valid calls)
    mask: np.ndarray | None = None  # which entries of `rows` were set by the intervention
    posterior_before: ParentPosterior | None = None  # valid calls, once the surrogate has seen `rows`
    posterior_after: ParentPosterior | None = None
    call_index: int | None = None  # valid calls before this one: keys its lookahead, shared by a GRPO group
    expected_info_gain: float | None = None  # the entropy drop the posterior expects of this call (`_look_ahead`)
    teacher_call: tuple[str, float] | None = None  # the options' last entry (the teacher's choice) when the call
    # was made; None: the effects were unknown (the teacher observes there)
    one_step_call: tuple[str, float] | None = None  # the one-step rule's choice then (never shown); None: unknown

    @property
    def follows_teacher(self) -> bool:
        """Whether the call is the teacher's (`policies.belief_line.TeacherPolicy`): the last option's setting, or
        observe where the effects were unknown."""
        return self._is(self.teacher_call)

    @property
    def follows_one_step(self) -> bool:
        """Whether the call is the one-step rule's (`policies.belief_line.OneStepPolicy`, the `belief_line` baseline)."""
        return self._is(self.one_step_call)

    def _is(self, call: tuple[str, float] | None) -> bool:
        if call is None:
            return self.tool == "observe"
        return self.intervention is not None and self.intervention[0] == call[0] and round(
            self.intervention[1], 1) == call[1]


@dataclass
class EpisodeRecord:
    scm: SCM
    budget: int
    initial_entropy: float
    initial_expected: float  # E[target] without intervention, where "best so far" starts
    optimum: float
    steps: list[StepRecord] = field(default_factory=list)
    invalid: Counter = field(default_factory=Counter)
    final_posterior: ParentPosterior | None = None
    initial_posterior: ParentPosterior | None = None  # after reset's observational rows
    surrogate_updates: int = 0
    reset_text: str = ""  # what reset returned (appended to the prompt)

    @property
    def used(self) -> int:
        return sum(s.valid for s in self.steps)

    @property
    def interventions(self) -> list[tuple[str, float]]:
        """The episode's accepted interventions, do(variable = value), in order."""
        return [s.intervention for s in self.steps if s.valid and s.intervention is not None]

    @property
    def best_expected(self) -> float:
        vals = [s.expected_target for s in self.steps if s.valid and s.expected_target is not None]
        best = self.initial_expected
        for v in vals:
            if self.scm.better(v, best):
                best = v
        return best

    @property
    def regret(self) -> float:
        gap = self.optimum - self.best_expected if self.scm.goal == "max" else self.best_expected - self.optimum
        return max(0.0, gap)

    @property
    def info_gain(self) -> float:
        return float(sum(s.info_gain for s in self.steps if s.valid))

    def agreement(self, rule: str) -> float | None:
        """The share of valid calls that made `rule`'s choice ("teacher" or "one_step"); None without valid calls."""
        valid = [s for s in self.steps if s.valid]
        return sum(getattr(s, f"follows_{rule}") for s in valid) / len(valid) if valid else None

    @property
    def final_entropy(self) -> float:
        valid = [s for s in self.steps if s.valid]
        return valid[-1].entropy_after if valid else self.initial_entropy

    @property
    def parent_f1(self) -> float:
        if self.final_posterior is None:
            raise ValueError("parent_f1: the episode has no posterior")
        return parent_f1(self.final_posterior.map_set(), self.scm.parents())

    def metrics(self) -> dict[str, float]:
        """This episode's values of the logged metrics (`LOGGED_METRICS`, in the metric contract): the causal ones,
        the calls accepted and the calls refused by kind (what `health/no_valid_calls` names)."""
        values = (self.info_gain, self.final_entropy, self.regret, self.parent_f1, float(sum(self.invalid.values())),
                  float(self.surrogate_updates), float(self.used), *(float(self.invalid[k]) for k in INVALID_KINDS))
        return dict(zip(LOGGED_METRICS, values, strict=True))


def format_target(target: str, values: np.ndarray) -> str:
    """The target's sampled values, `Y=2.1` (one per row, one decimal: the model reads these; the surrogate gets the
    whole rows)."""
    return " ".join(f"{target}={x:.1f}" for x in values)


def data_summary(scm: SCM, rows: np.ndarray, budget: int) -> str:
    """Reset's text: the budget and, over the initial observational rows, the sample correlation of the target
    with every other variable (`+0.6`; 0 where a column is constant or there are fewer than 2 rows)."""
    t = scm.index[scm.target]
    parts = []
    for v in scm.variables:
        if v == scm.target:
            continue
        r = 0.0
        if len(rows) >= 2:
            a, b = rows[:, scm.index[v]], rows[:, t]
            sa, sb = a.std(), b.std()
            if sa > 0 and sb > 0:
                r = float(np.mean((a - a.mean()) * (b - b.mean())) / (sa * sb))
        parts.append(f"{v} {r:+.1f}")
    text = f" Budget: {budget} calls."
    if len(rows):
        text += f" {len(rows)} samples, correlation with {scm.target}: {', '.join(parts)}."
    return text


def episode_settings(scm_json, seed, budget, initial_samples, target, row: dict) -> tuple[SCM, int, int]:
    """(SCM, budget, initial samples) of a row's fields, or `EpisodeError` naming the field."""
    if scm_json is None:
        raise EpisodeError(f"causal row needs 'scm_json' (columns: {sorted(['seed', *row])})")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise EpisodeError(f"causal row needs an int 'seed' for the episode's sampling, got {seed!r}")
    budget = DEFAULT_BUDGET if budget is None else budget
    initial = DEFAULT_INITIAL_SAMPLES if initial_samples is None else initial_samples
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise EpisodeError(f"row 'budget' must be an int >= 1, got {budget!r}")
    if isinstance(initial, bool) or not isinstance(initial, int) or initial < 0:
        raise EpisodeError(f"row 'initial_samples' must be an int >= 0, got {initial!r}")
    if not isinstance(scm_json, str):
        raise EpisodeError(f"row 'scm_json' must be the SCM as JSON text, got a {type(scm_json).__name__}")
    try:
        scm = scm_from_json(scm_json)
    except json.JSONDecodeError as err:
        raise EpisodeError(f"row 'scm_json' is not valid JSON ({err.msg} at character {err.pos})") from None
    except (ValueError, KeyError, TypeError, AttributeError) as err:  # SCMError, ExpressionError, a malformed spec
        raise EpisodeError(f"row 'scm_json' is not an SCM we can build: {type(err).__name__}: {err}") from None
    if target is not None and target != scm.target:
        raise EpisodeError(f"row 'target' {target!r} differs from the SCM's target {scm.target!r}")
    return scm, budget, initial


@lru_cache(maxsize=1024)
def scm_from_json(text: str) -> SCM:
    """The SCM of a row, parsed once per process: its optimum and reward normaliser (nonlinear SCMs: a numerical
    search of about a second) are cached on the object and shared by every episode on that row. Treat as read-only."""
    return SCM.from_json(text)


def check_surrogate_fits(kind: str, d: int, max_parents: int | None = None) -> None:
    """Refuse, naming the size, the limit and the surrogates that handle it, an SCM of d variables larger than the
    `kind` surrogate handles; and an in-degree bound (`max_parents`) for a surrogate that has none."""
    if kind not in SURROGATE_KINDS:
        raise EpisodeError(f"surrogate: must be one of {SURROGATES}, got {kind!r}")
    limit = SURROGATE_KINDS[kind].max_vars
    if limit is not None and d > limit:
        fits = [k for k in SAMPLED_SURROGATES if SURROGATE_KINDS[k].max_vars is None or d <= SURROGATE_KINDS[k].max_vars]
        raise EpisodeError(f"variables: the SCM has {d} variables, more than the {limit} the {kind} surrogate "
                           f"handles; {' and '.join(fits)} handle{'s' if len(fits) == 1 else ''} {d} "
                           f"(--surrogate {fits[0]})")
    if max_parents is not None:
        if not SURROGATE_KINDS[kind].bounded:
            bounded = [k for k, v in SURROGATE_KINDS.items() if v.bounded]
            raise EpisodeError(f"max_parents: the {kind} surrogate has no in-degree bound (surrogates with one: "
                               f"{', '.join(bounded)})")
        try:
            parent_bound(d, max_parents)
        except ValueError as err:
            raise EpisodeError(str(err)) from None


def build_surrogate(kind: str, variables: list[str], target: str, max_parents: int | None = None):
    check_surrogate_fits(kind, len(variables), max_parents)
    return SURROGATE_KINDS[kind].build(variables, target, max_parents)


class CausalEnv:
    """One episode of interventions on a seeded SCM (see module docstring). Configure via `make_causal_env`."""

    surrogate_kind = "exact"  # a SURROGATES name (recipe: `environment_settings: {surrogate_kind: additive}`)
    active = True  # False: the surrogate is frozen after the initial rows (never updated by a call)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.surrogate_kind not in SURROGATE_KINDS:  # the live registry: a surrogate module added later counts
            raise ValueError(f"surrogate_kind: must be one of {list(SURROGATE_KINDS)}, got {cls.surrogate_kind!r}")
        if not isinstance(cls.active, bool):
            raise ValueError(f"active: must be a bool, got {cls.active!r}")

    def __init__(self):
        self.scm: SCM | None = None
        self._surrogate = None
        self._record: EpisodeRecord | None = None
        self._rng: np.random.Generator | None = None
        self._last_posterior: ParentPosterior | None = None
        self._last_entropy: float | None = None
        self._belief: Belief | None = None
        self._state: tuple = ()  # what this episode's state is a function of (shared_work.py)

    @property
    def record(self) -> EpisodeRecord | None:
        return self._record

    @property
    def surrogate(self):
        return self._surrogate

    @property
    def episode_metrics(self) -> dict[str, float]:
        """The episode's causal metrics (`causal/*`, `surrogate/updates`), logged by the trainer as batch means. A
        property, not a method: TRL would offer a public method to the model as a tool."""
        return self.record.metrics()

    @property
    def call_rewards(self) -> list[dict[str, float]]:
        """Each call's reward terms, by component (= reward function) name, in the order the calls were answered
        (`reward_components.step_rewards`; they sum to the episode's rewards): what `call_credit` credits each call
        with. A property, not a tool."""
        return step_rewards(self.record)

    @property
    def state_key(self) -> tuple:
        """The episode's state (training/tool_use/state_keys.py): its row, the environment's settings and the valid
        calls so far, of which every later answer is a function (the same key `shared_work` shares work by). A
        property, not a tool."""
        return self._state

    @property
    def choices(self) -> list[Choice]:
        """The calls the last reply listed, `choose(option=k)` for each option k, each with the reward terms it would
        earn if made now (`Choice.terms()`: by component, the terms `call_rewards` would then hold for it, the same
        sampled row, lookahead and update), the environment left as it is: what choice credit weighs them by
        (training/tool_use/choices.py). Empty where no option is listed (the effects unknown) or the budget is
        spent. The terms are worked out once a process per state (`shared_work`). A property, not a tool."""
        if self._belief is None or not self._belief.known or self._record.used >= self._record.budget:
            return []
        options, state = self._belief.options, self._state

        def every() -> list[dict[str, float]]:  # one computation for all the choices of the state
            if self._state != state:
                raise EpisodeError("choices: their terms were read after the episode moved on (read them before the "
                                   "next call)")
            return SHARED.get(("choices", state), lambda: self._what_ifs(options))

        return [Choice({"name": "choose", "arguments": {"option": k}}, lambda k=k: every()[k - 1])
                for k in range(1, len(options) + 1)]

    def _what_ifs(self, options) -> list[dict[str, float]]:
        """Each option's `_what_if`, their lookaheads worked out together (the posterior draws made once) where the
        surrogate can, and kept for the call that is then made."""
        gains = getattr(self._surrogate, "expected_gains", None)
        keys = [self._lookahead_key(self._record.used, (o.variable, o.value)) for o in options]
        if self.active and gains is not None and any(k not in SHARED for k in keys):
            calls = [((self.scm.index[o.variable], o.value), self._mask_of(o.variable)) for o in options]
            for key, gain in zip(keys, gains(calls, LOOKAHEAD_DRAWS, self._lookahead_rng(self._record.used)),
                                 strict=True):
                SHARED.put(key, gain)
        return [self._what_if(o.variable, o.value) for o in options]

    def _mask_of(self, var: str) -> np.ndarray:
        mask = np.zeros((1, self.scm.d), dtype=bool)
        mask[:, self.scm.index[var]] = True
        return mask

    def _what_if(self, var: str, val: float) -> dict[str, float]:
        """The reward terms of do(var = val) made now, on copies of the sampler and the surrogate."""
        rows = self.scm.sample(1, copy.deepcopy(self._rng), {var: val})
        mask = self._mask_of(var)
        step = StepRecord("choose", {}, True, "", rows=rows, mask=mask, intervention=(var, val),
                          call_index=self._record.used)
        after, gain = self._last_posterior, 0.0
        if self.active:
            self._look_ahead(step)
            surrogate = copy.deepcopy(self._surrogate)
            surrogate.update(rows, mask)
            after, gain = surrogate.posterior(), step.expected_info_gain
        history = tuple(s.intervention for s in self._record.steps if s.valid)
        made = Step(self.scm, self._last_posterior, after, (var, val), rows, history, self._record.budget, gain)
        return {name: fn(made) for name, fn in STEP_COMPONENTS.items()}

    @property
    def belief(self) -> Belief | None:
        """The belief the last reply showed (reset's, or the last valid call's); a property, not a tool."""
        return self._belief

    def reset(self, scm_json: str | None = None, seed: int | None = None, budget: int | None = None,
              initial_samples: int | None = None, target: str | None = None, max_parents: int | None = None,
              **row) -> str:
        """Start an episode on the row's SCM; returns the budget, a short summary of the initial data and the
        options after it. `max_parents`: the surrogate's in-degree bound (`subsets.parent_bound`)."""
        self.scm, budget, initial = episode_settings(scm_json, seed, budget, initial_samples, target, row)
        self._rng = generator(seed)  # the seed rule: training.evaluation.pairing_seeds
        self._seed = int(seed)
        self._state = (type(self).surrogate_kind, type(self).active, scm_json, self._seed, budget, initial, max_parents)
        self._surrogate = build_surrogate(self.surrogate_kind, self.scm.variables, self.scm.target, max_parents)
        rows = self.scm.sample(initial, self._rng)
        if initial:  # frozen too: the ablation holds the belief still, it does not take it away
            self._surrogate.update(rows, np.zeros_like(rows, dtype=bool))
        self._last_posterior, self._last_entropy = self._surrogate.posterior(), self._surrogate.entropy()
        self._record = EpisodeRecord(self.scm, budget, self._last_entropy, self.scm.expected_target(),
                                     self.scm.optimum().expected, initial_posterior=self._last_posterior)
        self._sync_record()
        self._record.reset_text = f"{data_summary(self.scm, rows, budget)} {self._read_belief()}"
        return self._record.reset_text

    @classmethod
    def check_row(cls, row: dict) -> None:
        """Everything `reset` would refuse about `row`, before any work (`training.run_setup.input_checks` calls this for
        every train and held-out row): its fields, and its SCM built, sampled once at the ends of every range and
        its optimum computed (`scm_checks`; cached, so the episodes reuse it). Raises `EpisodeError`."""
        scm_json = row.get("scm_json")
        settings = {k: row.get(k) for k in ("seed", "budget", "initial_samples", "target")}
        scm, _, _ = episode_settings(scm_json, **settings, row={k: v for k, v in row.items() if k not in settings})
        check_surrogate_fits(cls.surrogate_kind, scm.d, row.get("max_parents"))
        try:
            check_scm(scm)
        except SCMError as err:
            raise EpisodeError(f"scm_json: {err}") from None

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
            return self._record.steps[-1].outcome
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
            return self._record.steps[-1].outcome
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
            return self._record.steps[-1].outcome
        rows = self.scm.sample(OBSERVE_ROWS, self._rng)
        return self._accept("observe", {}, rows, np.zeros_like(rows, dtype=bool), None, None)

    # ---- bookkeeping ----------------------------------------------------------------------------------------------
    def _do(self, tool: str, args: dict, var: str, val: float) -> str:
        """Sample one row under the checked do(var = val) and answer it."""
        rows = self.scm.sample(1, self._rng, {var: val})
        mask = np.zeros_like(rows, dtype=bool)
        mask[:, self.scm.index[var]] = True
        return self._accept(tool, args, rows, mask, self.scm.expected_target({var: val}), (var, val))

    def _refuse_past_budget(self, tool: str, args: dict) -> bool:
        if self._record is None:
            raise EpisodeError(f"{tool} called before reset")
        if self._record.used < self._record.budget:
            return False
        self._refuse(tool, args, "budget_exceeded", f"budget of {self._record.budget} calls used up")
        return True

    def _refuse(self, tool: str, args: dict, kind: str, message: str) -> str:
        self._record.invalid[kind] += 1
        self._record.steps.append(StepRecord(tool, args, valid=False, outcome=f"error: {message}", error_kind=kind,
                                             **self._shown_choices()))
        return f"error: {message}"

    def _accept(self, tool: str, args: dict, rows: np.ndarray, mask: np.ndarray, expected: float | None,
                intervention: tuple[str, float] | None) -> str:
        left = self._record.budget - self._record.used - 1
        sampled = rows[:, self.scm.index[self.scm.target]]
        text = f"{format_target(self.scm.target, sampled)} ({left} calls left)"
        step = StepRecord(tool, args, True, text, target_value=float(sampled.mean()), expected_target=expected,
                          intervention=intervention, rows=rows, mask=mask, call_index=self._record.used,
                          **self._shown_choices())
        self._record.steps.append(step)
        step.regret = self._record.regret
        self._learn(step)
        self._state = (*self._state, intervention or tool)
        step.outcome = text = f"{text}\n{self._read_belief()}"
        return text

    def _learn(self, step: StepRecord) -> None:
        """The surrogate's work for an accepted call: its expected information gain (against the posterior before
        the call's rows), the update with those rows, and the record of what the update did. Frozen: the record
        only."""
        if self.active:
            self._look_ahead(step)
            self._surrogate.update(step.rows, step.mask)
        self._settle(step)

    def _shown_choices(self) -> dict:
        """What the teacher and the one-step rule choose from the options now shown (None where the effects are
        unknown), recorded with the call that answers them."""
        if self._belief is None or not self._belief.known:
            return {"teacher_call": None, "one_step_call": None}
        return {"teacher_call": self._belief.teacher_choice.call, "one_step_call": self._belief.best.call}

    def _read_belief(self) -> str:
        """The options after the surrogate's current belief (`training.tasks.causal.belief`), the reply's last line,
        kept as `belief`."""
        self._belief = SHARED.get(("belief", self._state), lambda: Belief.of(
            self._surrogate, self.scm, belief_rng(self._seed, self._surrogate.updates), budget=self._record.budget,
            made=tuple(self._record.interventions)))
        return self._belief.line()

    def _look_ahead(self, step: StepRecord) -> None:
        """Record the call's expected information gain, measured against the posterior before its rows: the
        surrogate's `expected_gain`, with draws keyed by (environment seed, valid-call index), so a GRPO group's
        rollouts (one row, one seed) making the same call at the same point are credited alike. The structure
        reward pays this, not the realised drop: the policy chooses the call, not the noise of its one row. None
        where the surrogate cannot say (2 observational rows per variable are needed); the structure reward then
        refuses the episode."""
        expected_gain = getattr(self._surrogate, "expected_gain", None)
        if expected_gain is None:
            return
        do = None if step.intervention is None else (self.scm.index[step.intervention[0]], step.intervention[1])
        step.expected_info_gain = SHARED.get(
            self._lookahead_key(step.call_index, step.intervention or step.tool),
            lambda: expected_gain(do, step.mask, LOOKAHEAD_DRAWS, self._lookahead_rng(step.call_index)))

    def _lookahead_key(self, call_index: int, call) -> tuple:
        return "lookahead", self._state, call_index, call

    def _lookahead_rng(self, call_index: int) -> np.random.Generator:
        return generator(self._seed, call_index, LOOKAHEAD_SEED_KEY)

    def _settle(self, step: StepRecord) -> None:
        """Record what the surrogate's update with `step.rows` did (after it; frozen: that nothing moved)."""
        step.posterior_before = self._last_posterior
        step.entropy_before = self._last_entropy
        self._last_posterior = step.posterior_after = self._surrogate.posterior()
        self._last_entropy = step.entropy_after = self._surrogate.entropy()
        step.info_gain = step.entropy_before - step.entropy_after
        if not self.active:  # a frozen surrogate learns nothing from a call, now or in expectation
            step.expected_info_gain = 0.0
        self._sync_record()

    def _sync_record(self) -> None:
        self._record.final_posterior = self._last_posterior
        self._record.surrogate_updates = self._surrogate.updates


def make_causal_env(surrogate: str = "exact", active: bool = True) -> type[CausalEnv]:
    """A `CausalEnv` subclass (constructible with no arguments, as TRL needs) using the `surrogate` kind
    (`SURROGATES`: "exact" the linear-Gaussian one, "additive" the nonlinear one, "learned", "noop");
    `active=False` freezes the surrogate after the initial rows (no call updates it). What a recipe's
    `environment_settings` makes."""
    from training.run_setup.environment_settings import configured_environment

    return configured_environment(CausalEnv, {"surrogate_kind": surrogate, "active": active}, "make_causal_env")
