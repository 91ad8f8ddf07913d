"""The metric-name contract: names that tests, dashboards and users rely on, and when each one is logged.

Every training-step log (TRL's loggers, `report_to` trackers and `output_dir/metrics.jsonl`) carries these names
under the conditions given. A smoke run with every feature on carries all of them (tests/step/test_metric_contract.py).
Renaming one is a breaking change: add the new name beside the old one first.
"""

from __future__ import annotations

# name -> when it is logged ("always" = every training-step log)
CONTRACT: dict[str, str] = {
    # TRL's own
    "reward": "always",
    "reward_std": "always",
    "loss": "always",
    "grad_norm": "always",
    "frac_reward_zero_std": "always",
    "kl": "beta != 0",
    # record-at-sample (training/features/record_at_sample.py)
    "ratio/mean": "a micro-batch has tokens in the loss",
    "ratio/std": "a micro-batch has tokens in the loss",
    "ratio/min": "a micro-batch has tokens in the loss",
    "ratio/max": "a micro-batch has tokens in the loss",
    "sampling/logp_abs_diff": "logp_check_steps > 0, on the generation batches it measures",
    # forcing (training/features/forcing.py)
    "forced/rl_fraction": "always",
    "forced/assist_fraction": "always",
    # reference adapter (training/features/reference.py)
    "ref_sync/param_diffs": "sync_ref_model with LoRA, on steps that sync (must be 0 after a hard sync)",
    "ref_sync/count": "sync_ref_model with LoRA",
    # value head (training/features/value_head.py)
    "value/loss": "advantage_estimator gae or hybrid",
    "value/explained_variance": "advantage_estimator gae or hybrid",
    # judges (judges/adapter.py)
    "judge/calls": "a judge is among reward_funcs",
    "judge/failures": "a judge is among reward_funcs",
    # timing and memory
    "timing/generate_s": "always",
    "timing/score_s": "always",
    "timing/loss_s": "always",
    "timing/optimizer_s": "always",
    "memory/rss_mb": "always",
    # reward checks (training/features/reward_checks.py)
    "rewards/nan_count": "always",
    "rewards/nonfinite_count": "always",
    # health (training/step/health.py)
    "health/zero_loss": "always",
    "health/all_groups_zero_std": "always",
    "health/ratio_pinned": "always",
    "health/nonfinite_loss": "always",
    "health/grad_spike": "always",
    # causal job (training/tasks/causal/)
    "causal/info_gain": "causal environment",
    "causal/posterior_entropy": "causal environment",
    "causal/regret": "causal environment",
    "causal/parent_f1": "causal environment",
    "causal/invalid_calls": "causal environment",
    "surrogate/updates": "causal environment",
}

CAUSAL_REWARD_COMPONENTS = ("optimization", "structure", "parent", "exploration")
for _component in CAUSAL_REWARD_COMPONENTS:
    CONTRACT[f"rewards/{_component}/mean"] = "causal environment"
    CONTRACT[f"rewards/{_component}/std"] = "causal environment"


def contract_names(condition: str | None = None) -> list[str]:
    """The contract's names, all of them or those logged under `condition` (e.g. "always")."""
    return [name for name, when in CONTRACT.items() if condition is None or when == condition]
