"""Held-out evaluation of causal policies: an LM's (or a baseline's) episodes in `CausalEnv`, each read into its
measures.

`lm_episodes` plays a language model's episodes through the one tool loop every held-out evaluation uses
(training/evaluation/tool_loop.py: exactly as GRPO samples them, TRL 1.16's `_tool_call_loop`; greedy or sampled as
its `EpisodeSettings` say, a sampled episode from its own stream `episode_seed(seed, row, k)`), and reads each
finished environment's trace into the episode's measures.

Episodes are paired across policies: episode k of row r resets the environment with seed `environment_seed(r, k)`,
the seed `run_policy` (training.tasks.causal.policies.play) gives the baselines' episode k. So two policies' episode k
on a row start from the same observational data and draw the same noise for the same calls.

Each episode's measures (`episode_measures`, what an evaluation keeps as the episode's `extra`) hold the row's
identity, the policy, the episode's final regret, parent F1 of the final posterior's MAP parent set, cumulative
information gain (nats), final entropy, every reward component and the weighted reward, the invalid calls by kind
(environment refusals) and the malformed calls (tool-layer refusals), the calls made, the final posterior's parent
marginals P(X_j ∈ Pa(target)) (`parent_marginals`), the best E[target | do] the episode reached (`best_expected`,
against the SCM's `optimum` and `goal`) and its valid interventions per variable (`interventions_on`), and the shares
of its valid calls that made the teacher's choice and the one-step rule's (`teacher_agreement`, `one_step_agreement`,
None without valid calls; each call's `follows_teacher` and `follows_one_step` in the call log). `mean_metrics`
reduces them to means; `training.tasks.causal.compare_tables.summary_table` prints them per policy.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from training.evaluation.episode_settings import EpisodeSettings
from training.evaluation.tool_loop import play_episodes
from training.errors import BadInputError
from training.evaluation.pairing_seeds import environment_seed
from training.evaluation.progress import episode_bar
from training.tasks.causal.env import CausalEnv
from training.tasks.causal.policies.play import run_policy
from training.tasks.causal.policies.policy_catalogue import POLICIES
from training.tasks.causal.reward_components import COMPONENTS, episode_rewards, weighted_reward

SUMMARY_KEYS = ("regret", "parent_f1", "info_gain", "reward", *COMPONENTS, "invalid_calls", "malformed_calls",
                "calls")


def episode_measures(trace, row: dict, row_index: int, episode: int, policy: str, weights: dict | None = None,
                     malformed: Counter | None = None, at_limit: bool = False) -> dict:
    """The JSON-ready measures of a finished episode, from its trace (`EpisodeTrace`, `CausalEnv.trace`); `at_limit`:
    whether a language model's episode ended at the completion limit or the model's context."""
    components = episode_rewards(trace)
    calls = [{"tool": s.tool, **s.arguments, "valid": s.valid, "follows_teacher": s.follows_teacher,
              "follows_one_step": s.follows_one_step} for s in trace.steps]
    malformed = malformed or Counter()
    return {
        "policy": policy, "row": row_index, "episode": episode, "env_seed": environment_seed(row, episode),
        "scm_seed": row.get("scm_seed"), "family": row.get("family"), "mechanism": row.get("mechanism"),
        "n_vars": row.get("n_vars"), "budget": trace.budget,
        "regret": trace.regret, "parent_f1": trace.parent_f1, "info_gain": trace.info_gain,
        "final_entropy": trace.final_entropy, "reward": weighted_reward(components, weights), **components,
        "invalid_calls": float(sum(trace.invalid.values())), "invalid": dict(trace.invalid),
        "malformed_calls": float(sum(malformed.values())), "malformed": dict(malformed),
        "calls": float(trace.used), "call_log": calls, "ended_at_limit": float(at_limit),
        "teacher_agreement": trace.agreement("teacher"), "one_step_agreement": trace.agreement("one_step"),
        "parent_marginals": dict(trace.final_posterior.marginals),
        "goal": trace.scm.goal, "best_expected": trace.best_expected, "optimum": trace.optimum,
        "interventions_on": dict(Counter(s.intervention[0] for s in trace.steps if s.intervention is not None)),
    }


LOOKAHEAD_POLICIES = ("greedy_eig",)  # score every candidate by the surrogate's batched `what_if_many`
# Above COSTLY_MAX_VARS variables these are left out by default: the rollout makes about 24 x the calls left one-step
# evaluations a call (0.6 s each at 10 variables), greedy EIG an expected gain for each of 26 values of every variable
# (more than 38 minutes for 20 episodes of er12_linear.yaml, 12 variables, on one thread).
COSTLY_POLICIES = ("rollout", "greedy_eig")
COSTLY_MAX_VARS = 8


def supported_policies(given: str | None, surrogate: str, n_vars: int = 0) -> list[str]:
    """The policies to run: `given` (comma-separated) or, by default, every policy the surrogate supports on SCMs of
    up to `n_vars` variables in reasonable time (said on stdout when one is left out); refused, naming it, a given
    policy unknown or one the surrogate cannot run."""
    from training.tasks.causal.surrogates.catalogue import SURROGATES

    lookahead = SURROGATES[surrogate].lookahead
    if given is None:
        names = [p for p in POLICIES if lookahead or p not in LOOKAHEAD_POLICIES]
        if len(names) < len(POLICIES):
            print(f"--policies: {', '.join(p for p in POLICIES if p not in names)} left out: the {surrogate} "
                  f"surrogate has no batched lookahead (what_if_many)")
        if n_vars > COSTLY_MAX_VARS:
            print(f"--policies: {', '.join(COSTLY_POLICIES)} left out: on SCMs of {n_vars} variables (more than "
                  f"{COSTLY_MAX_VARS}) they take tens of seconds to minutes a call; name them in --policies to run "
                  "them")
            names = [p for p in names if p not in COSTLY_POLICIES]
        return names
    names = given.split(",")
    unknown = [p for p in names if p not in POLICIES]
    if unknown:
        raise BadInputError(f"--policies: unknown {unknown}; known: {sorted(POLICIES)}")
    unsupported = [p for p in names if p in LOOKAHEAD_POLICIES and not lookahead]
    if unsupported:
        raise BadInputError(f"--policies: {unsupported} need a surrogate with a batched lookahead (exact, additive); "
                            f"the {surrogate} surrogate has none")
    return names


def baseline_episodes(name: str, rows: list[dict], episodes: int, surrogate: str = "exact",
                      weights: dict | None = None, progress: str | None = None) -> list[dict]:
    """Records of baseline `name` (a `POLICIES` name) on every row, episodes 0 .. episodes-1; `progress`: the label
    of the bar of episodes done."""
    if name not in POLICIES:
        raise ValueError(f"baseline: must be one of {sorted(POLICIES)}, got {name!r}")
    policy = POLICIES[name]()
    out = []
    with episode_bar(len(rows) * episodes, progress) as bar:
        for i, row in enumerate(rows):
            for k in range(episodes):
                out.append(episode_measures(run_policy(policy, row, k, surrogate), row, i, k, name, weights))
                bar.update(1)
    return out


def causal_reset(env, row: dict, sample: int):
    """Episode `sample` of `row` starts from environment seed `environment_seed(row, sample)`, whatever the policy."""
    return env.reset(**{**row, "seed": environment_seed(row, sample)})


def lm_episodes(model, tokenizer, rows: list[dict], settings: EpisodeSettings, *, env_factory=CausalEnv,
                policy: str = "lm", weights: dict | None = None, progress: str | None = None) -> list[dict]:
    """Records of `settings.episodes_per_row` episodes per row played by `model` through the one tool loop
    (training/evaluation/tool_loop.py; see the module docstring); `progress`: the label of the bar of episodes
    done."""
    played = play_episodes(model, tokenizer, rows, env_factory, settings, reset=causal_reset, progress=progress)
    return [episode_measures(ep.env.trace, rows[ep.row], ep.row, ep.sample, policy, weights, ep.malformed,
                             ep.at_limit) for ep in played]


def mean_metrics(records: list[dict]) -> dict[str, float]:
    """Means over records of the summary keys, plus the number of episodes."""
    if not records:
        raise ValueError("mean_metrics: no records")
    out = {key: float(np.mean([r[key] for r in records])) for key in SUMMARY_KEYS}
    out["episodes"] = float(len(records))
    return out
