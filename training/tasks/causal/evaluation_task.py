"""The causal task in `python -m training.evaluate`: a policy's (or a scripted baseline's) episodes on the held-out
SCMs, as the generic episode records (`training.evaluation.episodes.Episode`).

An episode's `score` is its weighted reward (the recipe's weights), `components` the four reward components, and
`metrics` the causal measures `python -m training.compare` tests (final regret, parent F1 of the final posterior,
cumulative information gain; with the calls made, refused and malformed); `extra` keeps the whole record
`training.tasks.causal.policy_episodes` writes (the call log, the final parent marginals), which
`python -m training.tasks.causal.results` reads. `seed` is the episode's `episode_seed(eval_seed, row, k)`: a sampled
episode's token stream, and for every policy the pairing key (episode k of an SCM resets the environment with
`environment_seed(row, k)` whatever the policy); greedy episodes have none, as everywhere.

The environment is the recipe's `environment_factory` (`CausalEnvFrozen` for a frozen surrogate:
`python -m training.evaluate RUN_DIR --set environment_factory=training.tasks.causal.env.CausalEnvFrozen`, the run's
own model); the baselines (`--baseline NAME`) are
`training.tasks.causal.policies.policy_catalogue.POLICIES`, played with the same surrogate, active only.
"""

from __future__ import annotations

import math
from pathlib import Path

from training.evaluation.episodes import SCORE, Episode, write_episodes
from training.evaluation.pairing_seeds import episode_seed
from training.evaluation.spec import EvalSpec, EvalSpecError
from training.evaluation.task_registry import environment_rows
from training.tasks.causal.env import CausalEnv
from training.tasks.causal.reward_components import COMPONENTS

EPISODE_METRICS = ("regret", "parent_f1", "info_gain", "final_entropy", "calls", "invalid_calls", "malformed_calls")
METRIC_DIRECTIONS = {"regret": "lower", "parent_f1": "higher", "info_gain": "higher", SCORE: "higher"}


def applies(spec: EvalSpec) -> bool:
    """Whether the spec's environment is a `CausalEnv`."""
    if not spec.environment_factory:
        return False
    from training.run_setup.input_checks import import_object

    factory = import_object(spec.environment_factory, "environment_factory")
    return isinstance(factory, type) and issubclass(factory, CausalEnv)


def component_weights(spec: EvalSpec) -> dict[str, float] | None:
    """The recipe's weight of each reward component, by component name (None: the components' defaults)."""
    if spec.reward_weights is None:
        return None
    names = [entry.rpartition(".")[2] for entry in spec.reward_funcs]
    unknown = [n for n in names if n not in COMPONENTS]
    if unknown:
        raise EvalSpecError(f"{spec.source}: reward_funcs {unknown} are not causal reward components {COMPONENTS}")
    weights = dict(zip(names, spec.reward_weights, strict=True))
    return {name: float(weights.get(name, 0.0)) for name in COMPONENTS}


def as_episode(record: dict, eval_seed: int, sampled: bool) -> Episode:
    """The generic episode record of a causal one (module docstring)."""
    row, k = int(record["row"]), int(record["episode"])
    score = record["reward"]
    finite = score is not None and math.isfinite(score)
    return Episode(
        row=row, sample=k, seed=episode_seed(eval_seed, row, k) if sampled else None,
        score=float(score) if finite else None, components={c: record[c] for c in COMPONENTS},
        unscorable_reason=None if finite else f"weighted reward {score!r}",
        metrics={m: record[m] for m in EPISODE_METRICS}, extra=record,
    )


def call_counts(records: list[dict]) -> dict[str, float]:
    return {"invalid_calls": sum(r["invalid_calls"] for r in records),
            "malformed_calls": sum(r["malformed_calls"] for r in records)}


def write_evaluation(out_dir, records: list[dict], eval_seed: int, meta: dict) -> Path:
    """Causal records (one decoding, or a baseline's) as an evaluation directory: `eval.jsonl` and
    `eval_summary.json` with the task's metric directions, what `training.compare` and
    `training.tasks.causal.results` read. Greedy records have no episode seed; the others are keyed by
    `episode_seed(eval_seed, row, k)`."""
    greedy = any(r.get("decoding") == "greedy" for r in records)
    episodes = [as_episode(r, eval_seed, sampled=not greedy) for r in records]
    return write_episodes(out_dir, episodes, {"task": "causal", "counts": call_counts(records),
                                              "metric_directions": dict(METRIC_DIRECTIONS), **meta})


def evaluate(spec: EvalSpec, policy) -> tuple[list[Episode], dict]:
    from training.tasks.causal.policy_episodes import baseline_episodes, lm_episodes

    factory, rows = environment_rows(spec)
    weights = component_weights(spec)
    sampled = not spec.greedy
    if isinstance(policy, str):  # a baseline's name (`baselines` below)
        if not factory.active:
            raise EvalSpecError("a frozen surrogate applies to language-model policies; the baselines read the live "
                                "surrogate")
        records = baseline_episodes(policy, rows, spec.samples_per_prompt, factory.surrogate_kind, weights=weights)
    else:
        from training.evaluation.episode_settings import EpisodeSettings

        model, tokenizer = policy
        records = lm_episodes(model, tokenizer, rows, EpisodeSettings.from_spec(spec), env_factory=factory,
                              policy="lm", weights=weights)
    decoding = "policy" if isinstance(policy, str) else ("sampled" if sampled else "greedy")
    for r in records:
        r.update(decoding=decoding, surrogate="active" if factory.active else "frozen",
                 surrogate_kind=factory.surrogate_kind, split=spec.heldout_file)
    keyed = sampled or isinstance(policy, str)  # a baseline's episodes pair with sampled ones
    return [as_episode(r, spec.eval_seed, keyed) for r in records], call_counts(records)
