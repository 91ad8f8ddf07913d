"""The causal task's one evaluator, for `python -m training.evaluate` and for the evaluation during training alike
(training/evaluation/eval_tasks.py): a policy's (or a scripted baseline's) episodes on the held-out SCMs, as the
generic episode records (`training.evaluation.episodes.Episode`), and the values logged during training
(`heldout_values`: `heldout/reward`, `heldout/regret`, `heldout/parent_f1`, `heldout/info_gain`,
`heldout/invalid_calls`, `heldout/malformed_calls`, each component `heldout/<component>`, and the greedy episodes'
`heldout/greedy_reward`, `heldout/greedy_regret`, `heldout/greedy_parent_f1`, `heldout/greedy_info_gain`).

An episode's `score` is its weighted reward (the run's or recipe's weights), `components` the four reward components,
and `metrics` the causal measures `python -m training.compare` tests (final regret, parent F1 of the final posterior,
cumulative information gain; with the calls made, refused and malformed); `extra` keeps the whole record
`training.tasks.causal.policy_episodes` writes (the call log, the final parent marginals), which
`python -m training.tasks.causal.results` reads. `seed` is the episode's `episode_seed(heldout_seed, row, k)`: a sampled
episode's token stream, and for every policy the pairing key (episode k of an SCM resets the environment with
`environment_seed(row, k)` whatever the policy); greedy episodes have none, as everywhere.

The environment is the recipe's `environment_factory` with its `environment_settings`; the task's own flags of
`python -m training.evaluate` (`EVALUATE_FLAGS`, the causal episode flags of `training.tasks.causal.episode_source`)
replace the rows by a split's or SCM files' (`--split`, `--scm`, with `--budget`, `--initial_samples`,
`--max_parents`), the surrogate (`--surrogate`; with other rows, by default the one that fits them,
`episode_source.surrogate_for`) or freeze it (`--frozen`: `python -m training.evaluate RUN_DIR --frozen`, the run's
own model). The baselines (`--baseline NAME`) are `training.tasks.causal.policies.policy_catalogue.POLICIES`, played
with the same surrogate, active only.
"""

from __future__ import annotations

import math
from dataclasses import replace

from training.evaluation.episode_choice import EpisodeChoice
from training.evaluation.episodes import AT_LIMIT, SCORE, Episode
from training.evaluation.eval_inputs import EvalInputs, inputs_from_spec
from training.evaluation.pairing_seeds import episode_seed
from training.evaluation.spec import EvalSpecError
from training.evaluation.eval_tasks import Played, reward_values
from training.run_setup.environment_settings import environment_setting, environment_type
from training.tasks.causal.env import CausalEnv
from training.tasks.causal.episode_source import EpisodeSource, add_episode_flags, rows_to_play, surrogate_for
from training.tasks.causal.policy_episodes import (
    baseline_episodes,
    lm_episodes,
    mean_metrics,
    supported_policies,
)
from training.tasks.causal.reward_components import COMPONENTS

RECORD_METRICS = ("regret", "parent_f1", "info_gain", "final_entropy", "calls", "invalid_calls", "malformed_calls")
METRIC_DIRECTIONS = {"regret": "lower", "parent_f1": "higher", "info_gain": "higher", SCORE: "higher"}
SAMPLED_KEYS = ("reward", "regret", "parent_f1", "info_gain", "invalid_calls", "malformed_calls", *COMPONENTS)
GREEDY_KEYS = ("reward", "regret", "parent_f1", "info_gain")
EVALUATE_FLAGS = ("split", "scm", "budget", "initial_samples", "max_parents", "surrogate", "frozen")
ROW_FLAGS = ("split", "scm", "budget", "initial_samples", "max_parents")  # flags that replace the spec's rows


def applies(environment_factory) -> bool:
    """Whether the environment is a `CausalEnv` (the class, or the class with its settings)."""
    environment = environment_type(environment_factory)
    return environment is not None and issubclass(environment, CausalEnv)


def component_weights(inputs: EvalInputs) -> dict[str, float] | None:
    """The weight of each reward component, by component name, as the run weighs its reward functions (1 each
    without `reward_weights`, 0 for a component it leaves out); None, the components' defaults, when it names no
    reward function. A reward function that is not a causal component is refused: the weighted reward would not be
    what the run optimises."""
    if not inputs.reward_names:
        return None
    unknown = [n for n in inputs.reward_names if n not in COMPONENTS]
    if unknown:
        raise EvalSpecError(f"{inputs.source}: reward_funcs {unknown} are not causal reward components {COMPONENTS}")
    weights = inputs.weights_by_name()
    return {name: float(weights.get(name, 0.0)) for name in COMPONENTS}


def as_episode(record: dict, heldout_seed: int, sampled: bool) -> Episode:
    """The generic episode record of a causal one (module docstring)."""
    row, k = int(record["row"]), int(record["episode"])
    score = record["reward"]
    finite = score is not None and math.isfinite(score)
    return Episode(
        row=row, sample=k, seed=episode_seed(heldout_seed, row, k) if sampled else None,
        score=float(score) if finite else None, components={c: record[c] for c in COMPONENTS},
        unscorable_reason=None if finite else f"weighted reward {score!r}",
        metrics={m: record[m] for m in RECORD_METRICS}, extra=record,
    )


def call_counts(records: list[dict]) -> dict[str, float]:
    return {"invalid_calls": sum(r["invalid_calls"] for r in records),
            "malformed_calls": sum(r["malformed_calls"] for r in records),
            AT_LIMIT: sum(r[AT_LIMIT] for r in records)}


def stamp(records: list[dict], decoding: str, env_factory, split: str | None) -> None:
    """What every record says about how it was played: the decoding (sampled, greedy, or a scripted `policy`), the
    surrogate (live or frozen, and its kind) and the split it was played on."""
    active, kind = environment_setting(env_factory, "active"), environment_setting(env_factory, "surrogate_kind")
    for r in records:
        r.update(decoding=decoding, surrogate="active" if active else "frozen", surrogate_kind=kind, split=split)


def evaluate(inputs: EvalInputs, policy) -> tuple[list[Episode], dict]:
    """A policy's episodes on the inputs' rows: a language model `(model, tokenizer)` through the one tool loop, or
    a scripted baseline (its `POLICIES` name), each record stamped (`stamp`) and read into a generic episode."""
    factory, settings, weights = inputs.environment_factory, inputs.settings, component_weights(inputs)
    if isinstance(policy, str):  # a baseline's name (task.py)
        if not environment_setting(factory, "active"):
            raise EvalSpecError("--frozen: a frozen surrogate applies to language-model policies; the baselines read "
                                "the live surrogate")
        kind = environment_setting(factory, "surrogate_kind")
        supported_policies(policy, kind)
        records = baseline_episodes(policy, inputs.rows, settings.episodes_per_row, kind,
                                    weights=weights, progress=inputs.progress)
        decoding = "policy"
    else:
        unprompted = [i for i, r in enumerate(inputs.rows) if not r.get("prompt")]
        if unprompted:
            raise EvalSpecError(f"{inputs.split}: row {unprompted[0]} has no 'prompt', which a language model reads; "
                                "write rows with prompts by python -m training.tasks.causal.scm_rows, or pass --scm "
                                "FILE")
        model, tokenizer = policy
        records = lm_episodes(model, tokenizer, inputs.rows, settings, env_factory=factory, policy="lm",
                              weights=weights, progress=inputs.progress)
        decoding = "greedy" if settings.sampling is None else "sampled"
    stamp(records, decoding, factory, inputs.split)
    keyed = decoding != "greedy"  # a baseline's episodes pair with sampled ones
    return [as_episode(r, settings.seed, keyed) for r in records], call_counts(records)


def heldout_values(sampled: Played, greedy: Played) -> dict[str, float]:
    """What the evaluation during training logs: the sampled episodes' means (`heldout/<key>` for each of
    `SAMPLED_KEYS`), the greedy ones' (`heldout/greedy_<key>`), and the generic reward values."""
    values = {f"heldout/{k}": v for k, v in mean_metrics([e.extra for e in sampled[0]]).items() if k in SAMPLED_KEYS}
    values.update({f"heldout/greedy_{k}": v for k, v in mean_metrics([e.extra for e in greedy[0]]).items()
                   if k in GREEDY_KEYS})
    return {**values, **reward_values(sampled, greedy)}


def add_flags(group) -> None:
    """The causal task's own flags of `python -m training.evaluate` (`EVALUATE_FLAGS`)."""
    add_episode_flags(group, EVALUATE_FLAGS)


def with_flags(source: EpisodeSource, choice: EpisodeChoice, spec) -> EvalInputs | None:
    """The inputs the flags ask for (None when none is given: the spec's own). A row flag plays the split's or SCM
    files' rows (the bundled held-out split when only the episode settings are given; the first `--max_rows`) with
    the surrogate `surrogate_for` picks; `--surrogate` alone or `--frozen` alone change the spec's environment."""
    if not any(getattr(source, name) is not None for name in EVALUATE_FLAGS):
        return None
    settings = dict(spec.environment_settings or {})
    if source.frozen:
        settings["active"] = False
    if all(getattr(source, name) is None for name in ROW_FLAGS):
        if source.surrogate is not None:
            settings["surrogate_kind"] = source.surrogate
        return inputs_from_spec(replace(spec, environment_settings=settings or None))
    rows, where = rows_to_play(source, choice.max_rows)
    settings["surrogate_kind"] = surrogate_for(rows, source.surrogate or settings.get("surrogate_kind"), where)
    return inputs_from_spec(replace(spec, environment_settings=settings), rows=rows, split=where)
