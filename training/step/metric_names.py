"""The metric-name contract: names that tests, dashboards and users rely on, and when each one is logged.

Every training-step log (TRL's loggers, `report_to` trackers and `output_dir/metrics.jsonl`) carries these names
under the conditions given. A smoke run with every feature on carries all of `CONTRACT` (tests/step/test_metric_contract.py);
a task adds its own names (its `Task`'s `metrics`, training/run_setup/tasks.py), and `contract()` is the whole.
Renaming one is a breaking change: add the new name beside the old one first.
"""

from __future__ import annotations

TOOL_RUN = "a tool run, on steps that sample a generation batch"
TOOL_RUN_TRANSFORMERS = "a tool run on the transformers sampler, on steps that sample a generation batch"
VLLM_SAMPLER = "vLLM, colocate or server, on steps whose sampling follows a weight sync (training/run_setup/vllm_sampler.py)"
STEP_CREDIT = "step_credit, on steps that sample a generation batch whose rollouts made calls"
STEP_BRANCHES = "step_branches > 0, on steps that sample a generation batch"
CHOICE_CREDIT = "choice_credit, on steps that sample a generation batch"
CHOICE_LOSS = "choice_credit, on steps whose micro-batch has a choice token"
CREDIT = (STEP_CREDIT, STEP_BRANCHES, CHOICE_CREDIT, CHOICE_LOSS)  # a tool environment's credit: its own tests

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
    # the sampler/trainer gap (training/step/sampler_gap.py): by default every 10 generation batches on CUDA, in
    # bf16/fp16 or with vLLM; every `logp_check_steps` when set
    "sampling/logp_abs_diff": "on the generation batches the log-prob check measures",
    "sampling/logp_abs_diff_max": "on the generation batches the log-prob check measures",
    "sampling/logp_gap_above_normal": "on the generation batches the log-prob check measures",
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
    "timing/weight_sync_s": VLLM_SAMPLER,
    "memory/rss_mb": "always",
    "memory/gpu_peak_allocated_mb": "on CUDA (training/step/gpu_memory.py)",
    "memory/gpu_peak_reserved_mb": "on CUDA (training/step/gpu_memory.py)",
    # reward checks (training/features/reward_checks.py)
    "rewards/nan_count": "always",
    "rewards/nonfinite_count": "always",
    # health (training/step/health.py)
    "health/zero_loss": "always",
    "health/all_groups_zero_std": "always",
    "health/ratio_pinned": "always",
    "health/nonfinite_loss": "always",
    "health/grad_spike": "always",
    "health/no_valid_calls": "always (fires only where the environment logs tools/valid_calls)",
    "health/turn_lengthening": "always (fires only in a tool run, on steps that sample)",
    # turns of a tool run (training/features/turn_limits.py)
    **{name: TOOL_RUN for name in ("turns/count", "turns/cut", "turns/void", "turns/void_episodes",
                                   "turns/mean_tokens", "turns/max_tokens", "turns/limit")},
    # the share of a tool loop's context tokens served from the earlier turns' KV cache (training/tool_use/turn_cache.py;
    # transformers sampler only: vLLM keeps its own prefix cache)
    "turns/cache_reused": TOOL_RUN_TRANSFORMERS,
    # step-level credit (training/features/step_credit.py, step_branches.py)
    **{name: STEP_CREDIT for name in ("step_credit/group_size", "step_credit/singleton_share",
                                      "step_credit/nonzero_advantage_share")},
    **{name: STEP_BRANCHES for name in ("step_credit/branches", "step_credit/branch_generate_s")},
    # the expected gradient over a turn's offered choices (training/features/choice_credit.py)
    **{name: CHOICE_CREDIT for name in ("choice_credit/decisions", "choice_credit/unmatched_turns",
                                        "choice_credit/options")},
    **{name: CHOICE_LOSS for name in ("choice_credit/loss", "choice_credit/best_option_prob",
                                      "choice_credit/advantage_left")},
}

def contract() -> dict[str, str]:
    """The whole contract: the generic names and every registered task's; a task's name that is also a generic one
    is refused (a name has one meaning)."""
    from training.run_setup import tasks

    task_metrics = tasks.metrics()
    if clash := sorted(set(task_metrics) & set(CONTRACT)):
        raise ValueError(f"task metric names that are generic names too: {clash}")
    return {**CONTRACT, **task_metrics}


def contract_names(condition: str | None = None) -> list[str]:
    """The contract's names, all of them or those logged under `condition` (e.g. "always")."""
    return [name for name, when in contract().items() if condition is None or when == condition]
