"""Our additions to TRL's `GRPOConfig`, and the script arguments of `training.train`. Every field has help text."""

from __future__ import annotations

from dataclasses import dataclass, field

from trl import GRPOConfig


@dataclass
class StrictGRPOConfig(GRPOConfig):
    """`GRPOConfig` plus the strict stack's settings. The strict flags themselves come from the environment
    (`training.flags`), not from here, so a launcher decides them for every run it starts."""

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
    logp_check_steps: int = field(
        default=0,
        metadata={
            "help": "Every this many generation batches, recompute the sampled tokens' log-probs once with the "
            "trainer's forward pass and log `sampling/logp_abs_diff` against the sample-time ones. 0 disables."
        },
    )
    logp_diff_warn_threshold: float = field(
        default=1e-2,
        metadata={
            "help": "Warn when the mean |sample-time - recomputed| log-prob gap exceeds this: sampler and trainer "
            "disagree (dtype, chat template, weights not synced to vLLM)."
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
        default_factory=lambda: ["training.rewards.exact_answer_reward"],
        metadata={"help": "Reward functions as dotted import paths (`module.function`), in TRL's signature."},
    )
    warm_start_steps: int = field(
        default=0,
        metadata={
            "help": "Supervised warm-start steps on the train split (`prompt` -> `answer`) before GRPO; cached. "
            "0 starts GRPO from the model as loaded."
        },
    )
    warm_start_lr: float = field(default=3e-3, metadata={"help": "Learning rate of the supervised warm start."})
    model_seed: int = field(
        default=0, metadata={"help": "Initialisation seed of the offline tiny Qwen3 (`tiny-qwen3` model only)."}
    )
    environment_factory: str | None = field(
        default=None,
        metadata={
            "help": "Tool-use environment as a dotted path to a class or factory (e.g. "
            "`training.envs.workspace.WorkspaceEnv`), passed to TRL's `environment_factory`. None: no tools."
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
