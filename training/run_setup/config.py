"""Our additions to TRL's `GRPOConfig`, and the script arguments of `training.train`. Every field has help text."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import torch
from trl import GRPOConfig
from trl.trainer.utils import get_config_model_id

from training.algorithms.advantages import ESTIMATORS
from training.errors import BadInputError
from training.run_setup.precision import check_environment as check_precision_environment
from training.run_setup.precision import resolved_bf16


VOID_TURN_RULES = ("exclude", "credit")  # training/features/turn_limits.py


class ConfigError(BadInputError):
    """A configuration value out of its range; the message names the key, the value and what is expected."""


def check_range(name: str, value, expected: str, ok) -> None:
    """Raise `ConfigError` naming `name` unless `value` is a number (not a bool) for which `ok(value)` holds."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not ok(value):
        raise ConfigError(f"{name}={value!r} is invalid: expected {expected}")


def check_int(name: str, value, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"{name}={value!r} is invalid: expected an integer >= {low}")


@dataclass
class StrictGRPOConfig(GRPOConfig):
    """`GRPOConfig` plus the strict stack's settings. The strict flags themselves come from the environment
    (`training.run_setup.flags`), not from here, so a launcher decides them for every run it starts."""

    bf16: bool | None = field(
        default=None,
        metadata={
            "help": "bf16 mixed precision. None (default): on when a CUDA GPU is used and `fp16` is off, off on CPU, "
            "where TRL would turn it on too: bf16 autocast on CPU makes the trainer's log-probs differ from the fp32 "
            "sampler's by ~1e-3 (a PPO ratio that is not 1 on the first pass) and runs several times slower. The "
            "recipe's bf16/fp16 are the run's one source of precision: an ACCELERATE_MIXED_PRECISION that asks for "
            "another is refused (training/run_setup/precision.py)."
        },
    )
    overwrite_output_dir: bool = field(
        default=False,
        metadata={"help": "Allow writing into an `output_dir` that already holds an earlier run's files."},
    )
    max_wall_time_s: float | None = field(
        default=None,
        metadata={
            "help": "Wall-time guard in seconds: when reached, save a checkpoint, log why, and stop with exit 0. "
            "None disables the guard."
        },
    )
    accept_recipe_changes: list[str] | None = field(
        default=None,
        metadata={
            "help": "On resume: fields whose change from the run's recorded recipe is accepted and applied for the "
            "remaining steps (learning rate, schedule, seeds, ...; training/run_setup/run_recipe.py). Fields that cannot change "
            "(model, LoRA shape, rewards, data) are refused anyway."
        },
    )
    logp_check_steps: int | None = field(
        default=None,
        metadata={
            "help": "Every this many generation batches, recompute the sampled tokens' log-probs once with the "
            "trainer's forward pass and log `sampling/logp_abs_diff` (mean) and `sampling/logp_abs_diff_max` against "
            "the sample-time ones. None (default): every 10 in any run that can have a gap (on CUDA, in bf16/fp16, "
            "with vLLM), never in a float32 CPU run with the transformers sampler (training/step/sampler_gap.py). "
            "0 disables."
        },
    )
    logp_diff_warn_threshold: float | None = field(
        default=None,
        metadata={
            "help": "Warn (and log `sampling/logp_gap_above_normal` = 1) when the mean |sample-time - recomputed| "
            "log-prob gap exceeds this. None (default): the run's precision's normal (float32 1e-4, bfloat16 1e-2, "
            "float16 2e-3)."
        },
    )
    heldout_eval_steps: int = field(
        default=0,
        metadata={"help": "Evaluate the held-out reward every this many optimizer steps (0: only before and after)."},
    )
    heldout_max_samples: int = field(
        default=200,
        metadata={"help": "Number of held-out prompts scored by each held-out evaluation."},
    )
    heldout_samples_per_prompt: int = field(
        default=4,
        metadata={
            "help": "`heldout/reward` is the mean reward of this many completions (tool runs: episodes) per held-out "
            "prompt, sampled with the training temperature, top-p, top-k and min-p from a fixed seed (the policy's "
            "expected reward, which GRPO optimises); `heldout/greedy_reward` is logged beside it."
        },
    )
    heldout_seed: int = field(
        default=0,
        metadata={
            "help": "Seed of the held-out episodes: episode (row r, sample s) samples from its own seed derived from "
            "(heldout_seed, r, s), so runs evaluated with the same heldout_seed see the same prompts and random "
            "numbers (paired comparisons; training/evaluation/episodes.py). It belongs to the evaluation, not to the run: runs "
            "trained with different `seed`s are paired by default."
        },
    )
    tracking_group: str | None = field(
        default=None,
        metadata={
            "help": "Group of this run in the experiment trackers named by `report_to` (W&B `group`, trackio "
            "`group`; training/outputs/tracking.py). `training.workflow` sets it to the run's configuration, so that runs "
            "differing only by seed group together."
        },
    )
    strict_health: bool = field(
        default=True,
        metadata={
            "help": "Stop the run, after saving a checkpoint, when a health detector (`health/zero_loss`, "
            "`health/all_groups_zero_std`, `health/ratio_pinned`, `health/grad_spike`; training/step/health.py) fires for "
            "`health_patience` consecutive logged steps, or `health/nonfinite_loss` fires once (a NaN or infinite "
            "gradient is caught before the optimizer applies it). False: warn and count only."
        },
    )
    health_patience: int = field(
        default=3, metadata={"help": "Consecutive logged steps a health detector may fire before a strict stop."}
    )
    grad_spike_factor: float = field(
        default=10.0,
        metadata={
            "help": "`health/grad_spike` fires when a step's finite `grad_norm` exceeds this many times the median of "
            "the last 20 finite, non-zero grad norms (after `grad_spike_warmup` of them) and `grad_spike_floor` x "
            "`max_grad_norm`. 0 disables it."
        },
    )
    grad_spike_floor: float = field(
        default=0.1,
        metadata={
            "help": "`health/grad_spike` never fires for a `grad_norm` at or below this fraction of `max_grad_norm` "
            "(of 1 without clipping): a near-deterministic policy's gradients jump a hundredfold (1e-4 to 1e-2) "
            "without any instability (training/step/health.py)."
        },
    )
    grad_spike_warmup: int = field(
        default=5,
        metadata={"help": "Finite, non-zero grad norms to see before `health/grad_spike` may fire."},
    )
    logging_nan_inf_filter: bool = field(
        default=False,
        metadata={
            "help": "Transformers' filter that replaces a NaN or infinite loss by the running average in the logs. Off "
            "here (transformers turns it on): a non-finite loss is logged as it is and `health/nonfinite_loss` fires."
        },
    )
    reward_retries: int = field(
        default=2,
        metadata={
            "help": "Extra attempts for a plain reward function (not a judge: see `judge_retries`) whose call raised. "
            "When every attempt raises, the batch gets NaN from that function (counted in `rewards/<name>/errors`) "
            "or, with STRICT_TRAJ_KEYS=1, the run stops after saving a checkpoint, naming the function and the error "
            "(training/step/reward_retry.py)."
        },
    )
    reward_timeout_s: float | None = field(
        default=300.0,
        metadata={
            "help": "Seconds one call of a plain reward function may take; a call that takes longer counts as a failed "
            "attempt (retried, then NaN or a strict stop, like one that raised; `rewards/<name>/errors`). None "
            "disables the limit. The timed-out call's thread cannot be stopped: it is abandoned (judges: "
            "`judge_timeout_s`)."
        },
    )
    # ---- value head and GAE (training/algorithms/value.py, training/algorithms/advantages.py, training/features/value_head.py; docs/value_head.md) ----
    advantage_estimator: str = field(
        default="grpo",
        metadata={
            "help": "Advantages for the policy loss, by name from the registry in training/algorithms/advantages.py: 'grpo' "
            "(TRL's group-relative, no value head), 'gae' (GAE with a learned value baseline, whitened per batch), "
            "'hybrid' (Monte Carlo return-to-go minus the value baseline, normalised within each prompt's group). "
            "'gae' and 'hybrid' train a value head.",
        },
    )
    call_credit: bool = field(
        default=False,
        metadata={
            "help": "Credit each tool call with what it earned: every token of a model turn gets the group-normalised "
            "reward-to-go from that turn (its calls' and the later calls' per-call reward terms, which the "
            "environment reports as `call_rewards`), instead of GRPO's one advantage per episode "
            "(training/algorithms/turn_advantages.py, training/features/call_credit.py). Needs every reward function to "
            "have per-call terms, and advantage_estimator='grpo'.",
        },
    )
    choice_credit: bool = field(
        default=False,
        metadata={
            "help": "Where a turn made one of the calls the environment offered (its `choices`: calls written alike "
            "but for one token, each with what it would earn now), credit that token by the expected gradient over "
            "every offered choice by its own reward (not only the one sampled), and by the sampled return of the "
            "later calls (training/algorithms/choice_gradient.py, training/features/choice_credit.py). Needs "
            "call_credit; loss_type dr_grpo, dapo, bnpo or grpo.",
        },
    )
    step_credit: bool = field(
        default=False,
        metadata={
            "help": "Step-level credit (GiGPO's step groups): the calls a prompt's group made from the same state (the "
            "environment's `state_key`) form a step group, and each call's advantage adds step_credit_weight x its "
            "return from there minus the step group's mean, over the group's scale; a call alone in its state adds "
            "nothing (training/algorithms/step_advantages.py, training/features/step_credit.py). On top of GRPO's "
            "advantage or call_credit's. Needs an environment with a `state_key` property, and "
            "advantage_estimator='grpo'.",
        },
    )
    step_credit_weight: float = field(
        default=1.0, metadata={"help": "w in A = A_outer + w * A_step (step_credit; GiGPO's default 1)."}
    )
    step_branches: int = field(
        default=0,
        metadata={
            "help": "Continuations per generation batch that step_credit samples with the policy from the states "
            "its rollouts passed through after their first turn (value samples pooled into those step groups; "
            "their tokens never join the loss), given one at a time to the state whose step group pools the fewest "
            "returns (training/features/step_branches.py). 0: none.",
        },
    )
    vf_coef: float = field(
        default=0.1, metadata={"help": "Weight of the clipped value loss added to the policy loss (value head on)."}
    )
    gamma: float = field(
        default=1.0, metadata={"help": "Discount factor of GAE over completion tokens (value head on)."}
    )
    lam: float = field(default=0.95, metadata={"help": "GAE lambda: bias/variance trade-off (value head on)."})
    cliprange_value: float = field(
        default=0.2,
        metadata={"help": "Clip range of the value loss: new values may move at most this far from the old ones."},
    )
    value_kl_coef: float = field(
        default=0.0,
        metadata={
            "help": "Per-token KL penalty (log pi - log pi_ref) subtracted from the GAE rewards; needs beta != 0 "
            "(TRL computes the reference log-probs only then). 0 disables."
        },
    )
    # ---- Hub push (training/outputs/hub.py; docs/hub.md) ----
    push_dry_run: str | None = field(
        default=None,
        metadata={
            "help": "Write exactly what `--push_to_hub` would upload (adapter, tokenizer, model card, reward curve, "
            "recipe, optional merged weights) into this empty directory, and upload nothing. Never uses the network."
        },
    )
    push_merged_weights: bool = field(
        default=False,
        metadata={
            "help": "Also publish the base model with the LoRA adapter merged in (full weights, under `merged/`), "
            "loaded unquantised in `dtype`."
        },
    )
    # ---- judges, NaN rewards, zero-variance groups (judges/, training/features/reward_checks.py; docs/judges.md) ----
    judge_retries: int = field(
        default=1,
        metadata={"help": "Extra attempts for a judge group whose scoring raised, timed out or was unparseable."},
    )
    judge_timeout_s: float | None = field(
        default=300.0,
        metadata={"help": "Seconds one judge attempt on one group may take; None disables the limit."},
    )
    judge_max_failure_rate: float = field(
        default=0.5,
        metadata={
            "help": "Fraction of a batch's judge groups that may fail (rewards NaN, counted in `judge/failures`). "
            "Above it a strict run (STRICT_TRAJ_KEYS=1) stops with the judge's raw output; otherwise it warns."
        },
    )
    # a JSON string given on the command line (`--judge_kwargs '{...}'`) is parsed into a dict, like TRL's own dicts
    _VALID_DICT_FIELDS = GRPOConfig._VALID_DICT_FIELDS + ["judge_kwargs"]
    judge_kwargs: dict | str | None = field(
        default=None,
        metadata={
            "help": "Keyword arguments for the judges named in `reward_funcs`, keyed by reward name, e.g. "
            "`{embedding_judge: {reference_column: answer}, llm_judge: {model: tiny-qwen3, num_shuffles: 2}}`."
        },
    )
    reward_magnitude_limit: float = field(
        default=1e10,
        metadata={
            "help": "A reward whose magnitude exceeds this (or is infinite) is refused: counted in "
            "`rewards/nonfinite_count`, then the run stops under `strict_health` naming the function and the value, "
            "or the reward is masked as unscorable (NaN). Far below it float32 group statistics already lose the "
            "differences between rewards; past ~1e18 the group std overflows and every advantage becomes 0."
        },
    )
    zero_std_warn_threshold: float = field(
        default=0.5,
        metadata={
            "help": "Warn when `frac_reward_zero_std` (groups whose rewards are all equal: no signal) stays above "
            "this for `zero_std_warn_steps` generation batches in a row."
        },
    )
    zero_std_warn_steps: int = field(
        default=5,
        metadata={"help": "Consecutive generation batches above `zero_std_warn_threshold` before the warning."},
    )
    dynamic_sampling: bool = field(
        default=False,
        metadata={
            "help": "DAPO dynamic sampling: drop groups whose rewards are all equal and top the batch up with new "
            "groups from the train dataset (metrics `dynamic_sampling/*`)."
        },
    )
    dynamic_sampling_max_rounds: int = field(
        default=4,
        metadata={
            "help": "Generation rounds per batch with dynamic sampling (the first included); when still short, the "
            "batch is filled with zero-variance groups and `dynamic_sampling/unfilled_groups` says how many."
        },
    )
    # ---- tool agents: assisted calls, call budget (training/features/forcing.py, training/tool_use/, training/tasks/workspace/; docs/tool_agent.md) ----
    forced_sft_coef: float = field(
        default=0.0,
        metadata={
            "help": "Weight of a supervised term on the forced (assisted) tool-call tokens, next to the on-policy "
            "loss that never contains them. 0 disables it (the default)."
        },
    )
    max_tool_calls_per_episode: int = field(
        default=4,
        metadata={
            "help": "Tool calls allowed per rollout; later calls get a `too_many_turns` tool error back and are "
            "counted under `tools/malformed/too_many_turns`."
        },
    )

    # ---- turns of a tool run (training/tool_use/turn_end.py, training/features/turn_limits.py) ----
    max_turn_tokens: int | None = field(
        default=None,
        metadata={
            "help": "Tokens one model turn of a tool run may sample (every turn, in training on the transformers "
            "sampler and vLLM, and in the held-out tool loop alike); a turn that reaches it is cut (`turns/cut`). "
            "The episode's budget `max_completion_length` still holds (above it, the budget is the limit). None: "
            "min(256, max_completion_length // 2). The limit in force is logged at start. Set it to fit the task's "
            "longest well-formed turn; a run without tools refuses it.",
        },
    )
    end_turn_at_call: bool = field(
        default=True,
        metadata={
            "help": "A tool run's turn ends at its call's closing token (`</tool_call>`, which must be one token): "
            "the sampler stops there and the chat template's tail (`<|im_end|>`) is appended unsampled and kept out "
            "of the loss, so a well-formed turn never depends on sampling its end-of-turn token, and a turn holds "
            "one call. False: a turn ends only at its end-of-turn token (TRL's behaviour; several calls a turn).",
        },
    )
    void_turn_rule: str = field(
        default="credit",
        metadata={
            "help": "What the loss does with an episode that has a void turn (cut by `max_turn_tokens` or the "
            "episode's budget, or ending in an unclosed call; `turns/void`): 'credit' (default) keeps it in, each "
            "turn with its advantage (the episode's, or call_credit's own-reward rule), so a malformed call is pushed "
            "down; 'exclude' (SimpleTIR) keeps the episode out of the loss (its reward still counts in its group's "
            "baseline, its tokens in the loss's normaliser), which on CBO let malformed calls spread unopposed "
            "(docs/results/causal.md §3.0).",
            "choices": ["exclude", "credit"],
        },
    )
    turn_cut_rise: float = field(
        default=0.1,
        metadata={
            "help": "`health/turn_lengthening` fires when a step's share of turns cut at `max_turn_tokens` is at "
            "least this much above its median over the recent steps (training/step/health.py): the policy's turns "
            "are running on. 0 disables it.",
        },
    )

    def __post_init__(self):
        self.validate()
        on_cpu = self.use_cpu or os.environ.get("ACCELERATE_USE_CPU", "false").lower() in ("1", "true", "yes")
        self.bf16 = resolved_bf16(self.bf16, self.fp16, on_cpu, torch.cuda.is_available)
        check_precision_environment(self.bf16, self.fp16)  # before transformers takes ACCELERATE_MIXED_PRECISION
        try:
            super().__post_init__()
        except ValueError as err:  # TRL's and transformers' own checks: bad configuration too
            if isinstance(err, BadInputError):
                raise
            if self._groups_do_not_fit():
                raise self._groups_error() from None
            raise ConfigError(f"invalid configuration: {err}") from None
        if self._groups_do_not_fit():  # TRL checks it only in some branches
            raise self._groups_error()

    def _groups_do_not_fit(self) -> bool:
        return bool(self.num_generations and self.generation_batch_size) and (
            self.generation_batch_size % self.num_generations != 0
        )

    def _groups_error(self) -> ConfigError:
        return ConfigError(
            f"num_generations={self.num_generations} does not divide the generation batch of "
            f"{self.generation_batch_size} completions (per_device_train_batch_size={self.per_device_train_batch_size} "
            "x processes x steps_per_generation): choose a num_generations that divides it"
        )

    def validate(self) -> None:
        """Ranges TRL and transformers do not check (or check with a ZeroDivisionError); each error names its key."""
        check_int("per_device_train_batch_size", self.per_device_train_batch_size, 1)
        check_int("gradient_accumulation_steps", self.gradient_accumulation_steps, 1)
        if self.num_generations is not None:
            check_int("num_generations", self.num_generations, 2)
        if self.max_completion_length is not None:
            check_int("max_completion_length", self.max_completion_length, 1)
        check_int("max_steps", self.max_steps, -1)
        check_range("learning_rate", self.learning_rate, "a finite number >= 0", lambda v: 0 <= v < math.inf)
        check_range("temperature", self.temperature, "a finite number > 0", lambda v: 0 < v < math.inf)
        check_int("health_patience", self.health_patience, 1)
        check_range("grad_spike_factor", self.grad_spike_factor, "0 (off) or a number > 1", lambda v: v == 0 or v > 1)
        check_range("grad_spike_floor", self.grad_spike_floor, "a finite number >= 0", lambda v: 0 <= v < math.inf)
        check_int("grad_spike_warmup", self.grad_spike_warmup, 1)
        check_int("reward_retries", self.reward_retries, 0)
        if self.reward_timeout_s is not None:
            check_range("reward_timeout_s", self.reward_timeout_s, "a finite number > 0, or None",
                        lambda v: 0 < v < math.inf)
        check_int("judge_retries", self.judge_retries, 0)
        check_range("judge_max_failure_rate", self.judge_max_failure_rate, "a number in [0, 1]", lambda v: 0 <= v <= 1)
        check_int("heldout_max_samples", self.heldout_max_samples, 1)
        check_int("heldout_samples_per_prompt", self.heldout_samples_per_prompt, 1)
        check_int("heldout_eval_steps", self.heldout_eval_steps, 0)
        if self.logp_check_steps is not None:
            check_int("logp_check_steps", self.logp_check_steps, 0)
        if self.logp_diff_warn_threshold is not None:
            check_range("logp_diff_warn_threshold", self.logp_diff_warn_threshold, "a finite number > 0, or None",
                        lambda v: 0 < v < math.inf)
        check_int("dynamic_sampling_max_rounds", self.dynamic_sampling_max_rounds, 1)
        check_int("max_tool_calls_per_episode", self.max_tool_calls_per_episode, 1)
        check_range("vf_coef", self.vf_coef, "a finite number >= 0", lambda v: 0 <= v < math.inf)
        check_range("gamma", self.gamma, "a number in [0, 1]", lambda v: 0 <= v <= 1)
        check_range("lam", self.lam, "a number in [0, 1]", lambda v: 0 <= v <= 1)
        check_range("cliprange_value", self.cliprange_value, "a finite number > 0", lambda v: 0 < v < math.inf)
        check_range("value_kl_coef", self.value_kl_coef, "a finite number >= 0", lambda v: 0 <= v < math.inf)
        if self.advantage_estimator not in ESTIMATORS:  # the registry in training/algorithms/advantages.py
            raise ConfigError(f"advantage_estimator={self.advantage_estimator!r} is not one of {sorted(ESTIMATORS)}")
        for name in ("call_credit", "step_credit"):
            if getattr(self, name) and ESTIMATORS[self.advantage_estimator].needs_values:
                raise ConfigError(f"{name}=true sets the advantages per call, advantage_estimator="
                                  f"{self.advantage_estimator!r} sets them from a value head: choose one ({name} "
                                  "with advantage_estimator='grpo')")
        check_range("step_credit_weight", self.step_credit_weight, "a finite number >= 0", lambda v: 0 <= v < math.inf)
        check_int("step_branches", self.step_branches, 0)
        if self.choice_credit and not self.call_credit:
            raise ConfigError("choice_credit=true credits the later calls' return by call_credit, which is off: set "
                              "call_credit=true")
        if self.choice_credit and self.step_credit:
            raise ConfigError("choice_credit and step_credit both re-credit the choice token (its own reward exactly, "
                              "and again sampled in the step group): choose one")
        if self.step_branches and not self.step_credit:
            raise ConfigError(f"step_branches={self.step_branches} samples value samples for step_credit, which is "
                              "off: set step_credit=true, or step_branches=0")
        if self.max_turn_tokens is not None:
            check_int("max_turn_tokens", self.max_turn_tokens, 1)
        if self.void_turn_rule not in VOID_TURN_RULES:
            raise ConfigError(f"void_turn_rule={self.void_turn_rule!r} is not one of {list(VOID_TURN_RULES)}")
        check_range("turn_cut_rise", self.turn_cut_rise, "0 (off) or a number in (0, 1]", lambda v: 0 <= v <= 1)
        if self.max_wall_time_s is not None:
            check_range("max_wall_time_s", self.max_wall_time_s, "a number > 0, or None", lambda v: v > 0)


def strict_config(args: GRPOConfig | None, model) -> StrictGRPOConfig:
    """The trainer's config as TRL would build it: `StrictGRPOConfig`'s defaults when `args` is None (output_dir
    `<model name>-GRPO`, like TRL), a plain `GRPOConfig` carried over field by field (TRL's SFTTrainer does the same
    for `TrainingArguments`)."""
    if isinstance(args, StrictGRPOConfig):
        return args
    if args is None:
        name = model if isinstance(model, str) else get_config_model_id(model.config)
        return StrictGRPOConfig(f"{name.split('/')[-1]}-GRPO")
    if not isinstance(args, GRPOConfig):
        raise TypeError(f"args must be a GRPOConfig (or StrictGRPOConfig), got {type(args).__name__}")
    fields = args.to_dict()
    fields["hub_token"] = args.hub_token  # to_dict hides it
    fields.pop("push_to_hub_token", None)
    fields.pop("generation_batch_size")  # derived by GRPOConfig from steps_per_generation; both given is refused
    return StrictGRPOConfig(**fields)


@dataclass
class StrictScriptArguments:
    """What to train on and how to score it."""

    train_file: str = field(
        default="data/larger_number/train.jsonl",
        metadata={"help": "JSON-lines training split; each row needs a `prompt` (chat messages or text)."},
    )
    heldout_file: str | None = field(
        default="data/larger_number/heldout.jsonl",
        metadata={"help": "JSON-lines held-out split, scored before and after training. None skips it."},
    )
    reward_funcs: list[str] = field(
        default_factory=lambda: ["training.tasks.larger_number.rewards.exact_answer_reward"],
        metadata={"help": "Reward functions as dotted import paths (`module.function`), in TRL's signature."},
    )
    warm_start_steps: int = field(
        default=0,
        metadata={
            "help": "Supervised warm-start steps on the train split (`prompt` -> `answer`) before GRPO; cached "
            "(a progress bar with an ETA shows it unless `disable_tqdm`). 0 starts GRPO from the model as loaded."
        },
    )
    warm_start_lr: float = field(default=3e-3, metadata={"help": "Learning rate of the supervised warm start."})
    warm_start_batch_size: int | None = field(
        default=None,
        metadata={"help": "Sequences per warm-start step. None: the warm start's own default (32 prompt-answer pairs, "
                  "8 tool traces)."},
    )
    warm_start_tool_call_rate: float = field(
        default=1.0,
        metadata={
            "help": "Tool-agent warm start only: share of the teacher's traces that act through the reference tool "
            "calls; the rest reply the final answer without calling any tool (a policy that rarely calls tools, "
            "which assisted sampling and RL then have to fix). In (0, 1]."
        },
    )
    trainer: str = field(
        default="strict",
        metadata={
            "help": "'strict': StrictGRPOTrainer (the strict stack). 'trl': plain `trl.GRPOTrainer` on the same "
            "data, model, LoRA and rewards, with the same held-out evaluation (training/step/plain_trl.py), as a "
            "baseline for comparisons.",
            "choices": ["strict", "trl"],
        },
    )
    model_seed: int = field(
        default=0, metadata={"help": "Initialisation seed of the offline tiny Qwen3 (`tiny-qwen3` model only)."}
    )
    environment_factory: str | None = field(
        default=None,
        metadata={
            "help": "Tool-use environment as a dotted path to a class or factory (e.g. "
            "`training.tasks.workspace.env.WorkspaceEnv`), passed to TRL's `environment_factory`. None: no tools."
        },
    )
    environment_settings: dict | str | None = field(
        default=None,
        metadata={
            "help": "Settings of the environment class (YAML mapping, or its JSON/YAML text on the command line): "
            "keyword arguments of its constructor (each one it takes; training/run_setup/environment_settings.py), "
            "e.g. the causal task's `{surrogate_kind: additive, active: false}`."
        },
    )
    system_prompt_file: str | None = field(
        default=None,
        metadata={
            "help": "Jinja system prompt prepended to every row when an environment is set; rendered with `tools` = "
            "the environment's tool schemas. Every tool name it mentions is checked against the environment."
        },
    )
    tool_names: list[str] | None = field(
        default=None,
        metadata={"help": "Tools the recipe expects; when given, must equal the environment's tools exactly."},
    )

    def __post_init__(self):
        if isinstance(self.environment_settings, str):
            import yaml

            try:
                self.environment_settings = yaml.safe_load(self.environment_settings)
            except yaml.YAMLError as err:
                raise ConfigError(f"environment_settings={self.environment_settings!r} is not YAML: {err}") from None
        if self.environment_settings is not None and not isinstance(self.environment_settings, dict):
            raise ConfigError(f"environment_settings={self.environment_settings!r} must be a mapping of the "
                              "environment's constructor keywords to values (YAML: environment_settings: {name: value})")
        if self.environment_settings and not self.environment_factory:
            raise ConfigError("environment_settings is given without an environment_factory to apply it to")
        if isinstance(self.reward_funcs, str) or not isinstance(self.reward_funcs, list):
            raise ConfigError(
                f"reward_funcs={self.reward_funcs!r} must be a list of dotted paths 'module.function' (YAML: "
                f"reward_funcs: [{self.reward_funcs}])"
            )
        check_int("warm_start_steps", self.warm_start_steps, 0)
        check_range("warm_start_lr", self.warm_start_lr, "a finite number > 0", lambda v: 0 < v < math.inf)
        if self.warm_start_batch_size is not None:
            check_int("warm_start_batch_size", self.warm_start_batch_size, 1)
        check_range(
            "warm_start_tool_call_rate", self.warm_start_tool_call_rate, "a number in (0, 1]", lambda v: 0 < v <= 1
        )
        check_int("model_seed", self.model_seed, 0)
