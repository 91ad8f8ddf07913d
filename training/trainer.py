"""`StrictGRPOTrainer`: TRL's `GRPOTrainer` with the strict stack wired in. One training step reads top to bottom here.

Every TRL method the stack needs is overridden once, in this file, and calls the features (training/features/, one
plain object each) in written order. No other class overrides a TRL method but the vLLM sampler and its server
client (training/run_setup/vllm_sampler.py: the engine's dtype and CPU weights, settled where TRL builds it;
vllm_server_client.py: the weight sync to a CPU server); data passes between features in the batch (keys in
training/algorithms/trajectory.py), never on the trainer.

    generation   `_generate_and_score_completions`: dynamic sampling runs one or more sampling rounds; each round
                 plans forcing, lets TRL generate and score (our hooks inside: `_generate` checks tool calls, notes
                 each call's model turn and counts the turns (`turn_limits`: appended tokens out of the loss, void
                 turns), `_generate_single_turn` samples under the turn's limit, records log-probs, ends each turn at
                 its call's closing token and writes forced first turns, `_calculate_rewards` checks the rewards,
                 `_get_per_token_logps_and_entropies` answers TRL's old-log-prob forward from the recorded
                 log-probs), then logs the environments' episode metrics, attaches the old log-probs, rewards and
                 group ids, replaces the advantages by per-call ones (`call_credit`), masks forced rows and episodes
                 with a void turn, logs which tokens carry the gradient (`gradient_weight`) and checks the schema;
                 then the zero-std watch and, every `logp_check_steps` batches, the sampler/trainer log-prob
                 agreement check.
    loss         `_compute_loss`: schema check, forced-leak check, unscorable tokens masked, TRL's loss (its forward
                 feeds the value head and the ratio statistics, its head scores the loss mask's tokens only:
                 `policy_head`), the value loss, the optional supervised term.
    optimizer    `create_optimizer`, `_clip_grad_norm`, `_get_grad_norm`: the value head in the optimizer and in the
                 same clipping. After the step, callbacks sync the reference adapter and check the value head moved.
    logging      `log`: memory and the reference sync count join the log; the health detectors run on it (a strict
                 stop raises here, after the line is written). On CUDA a callback adds each step's peak GPU memory.
    checkpoints  `save_model`, `_save_checkpoint`, `_load_from_checkpoint`: the value head, the features' state, the
                 reference adapter.
"""

from __future__ import annotations

import inspect
import json
import math
from contextlib import nullcontext
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import torch
from peft import PeftModel
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from trl import GRPOTrainer

from judges.adapter import JudgeSettings
from training.algorithms.trajectory import check_generation_batch, loss_mask
from training.evaluation.episode_settings import EpisodeSettings
from training.evaluation.trainer_heldout import HeldoutEvaluation
from training.features.call_credit import CallCredit
from training.features.choice_credit import ChoiceCredit
from training.features.dynamic_sampling import DynamicSampling
from training.features.environment_metrics import EnvironmentMetrics
from training.features.forcing import Forcing, Plan, policy_logps
from training.features.policy_token_head import PolicyTokenHead
from training.features.record_at_sample import RecordAtSample, recorded_logps_tensor
from training.features.reference import ReferenceAdapter
from training.features.reward_checks import RewardChecks, local_rewards_and_groups
from training.features.step_branches import StepBranches
from training.features.step_credit import StepCredit
from training.features.tools import ToolCalls
from training.features.turn_limits import TurnLimits
from training.features.value_head import ValueHeadFeature, ValueHeadStepCallback
from training.features.zero_std_watch import ZeroStdWatch
from training.outputs import run_files
from training.outputs.checkpoints import save_complete_checkpoint
from training.outputs.train_loss import whole_run_loss
from training.run_setup.config import StrictGRPOConfig, strict_config
from training.errors import MissingPathError
from training.run_setup.flags import StrictFlags, read_flags
from training.run_setup.vllm_sampler import recipe_dtype_sampler
from training.step.callbacks import (
    HeldoutEvalCallback,
    MetricsJsonlCallback,
    OptimizerTimingCallback,
    WallTimeGuardCallback,
)
from training.step.diagnostics import rss_mb, timed
from training.step.gpu_memory import gpu_memory_callback
from training.step.health import HealthMonitorCallback
from training.step.gradient_weight import log_gradient_weight
from training.step.precision_probe import PrecisionProbe
from training.step.sampler_gap import gap_plan, run_precision, sampler_name
from training.tool_use.turn_cache import TurnCache

FEATURE_STATE_FILE = run_files.FEATURE_STATE


@dataclass
class _Round:
    """What our hooks hand each other while TRL's `_generate_and_score_completions` runs one sampling round. TRL's
    method is one block that calls them in the middle, so this cannot travel in the batch; it lives for that call."""

    forcing_plan: Plan
    skip_old_logp_forward: bool  # answer TRL's old-log-prob forward from the recorded log-probs
    first_turn: bool = True
    sampling_logps: list[list[float]] | None = None
    rewards_per_func: torch.Tensor | None = None
    episode_tools: list | None = None  # each rollout's `EpisodeTools` (the turn of every call it passed on)
    void_rollouts: list[bool] | None = None  # which rollouts have a void turn (features/turn_limits.py)


@dataclass
class _LossPass:
    """The micro-batch whose loss TRL is computing, for the hook inside TRL's loss forward."""

    batch: dict
    forward_seen: bool = False
    values: torch.Tensor | None = None


class StrictGRPOTrainer(GRPOTrainer):
    """GRPO with LoRA that makes silent failures loud. A drop-in for `GRPOTrainer`: every argument it takes is taken
    here too (no `args` gives `StrictGRPOConfig`'s defaults; a plain `GRPOConfig` is carried over field by field).

    Args beyond `GRPOTrainer`'s:
        flags: the strict flags; read (and validated) from the environment when not given.
        heldout_rows: held-out rows (`prompt` plus reward columns) scored by `evaluate_heldout`.
    """

    args: StrictGRPOConfig

    def __init__(self, model, reward_funcs=None, args=None, *trl_args, flags: StrictFlags | None = None,
                 heldout_rows: list[dict] | None = None, **trl_kwargs):
        bound = inspect.signature(GRPOTrainer.__init__).bind(self, model, reward_funcs, args, *trl_args, **trl_kwargs)
        args = bound.arguments["args"] = strict_config(args, model)
        self.flags = flags if flags is not None else read_flags()
        if self.flags.force_rate > 0 and bound.arguments.get("rollout_func") is not None:
            raise ValueError("FORCE_RATE > 0 needs TRL's own sampler: a rollout_func generates without the first-turn "
                             "hook that writes forced tool calls. Set FORCE_RATE=0 or drop rollout_func.")
        uses_peft = bound.arguments.get("peft_config") is not None or isinstance(model, PeftModel)
        self.reference = ReferenceAdapter(args, uses_peft)
        with self.reference.trl_init(), recipe_dtype_sampler():
            super().__init__(*bound.args[1:], **bound.kwargs)
        self._round: _Round | None = None
        self._loss: _LossPass | None = None
        train_metrics = self._metrics["train"]
        unwrapped = self.accelerator.unwrap_model(self.model)
        self.precision_probe = PrecisionProbe()
        self.precision_probe.attach(unwrapped)

        sampler = sampler_name(self.use_vllm, args.vllm_mode, self.use_transformers_continuous_batching)
        precision = run_precision(self.accelerator.mixed_precision, unwrapped)
        gap = gap_plan(args.logp_check_steps, args.logp_diff_warn_threshold, self.accelerator.device.type, precision,
                       sampler, self.vllm_generation.engine_dtype if self.use_vllm else precision)
        self.record = RecordAtSample(self.flags.ppo_record_at_sample, gap)
        self.forcing = Forcing(self.flags, self._tokenizer, self.max_completion_length, args.forced_sft_coef, args.seed)
        self.tool_calls = ToolCalls(self._tokenizer, bool(self.tools), args.max_tool_calls_per_episode)
        self.turn_limits = TurnLimits(args, self._tokenizer, self.chat_template, dict(self.chat_template_kwargs or {}),
                                      self.eos_token_ids, bool(self.tools), bound.arguments.get("rollout_func"))
        if self.use_vllm:
            self.vllm_generation.sync_metrics = train_metrics
        if self.turn_limits.enabled:  # every turn sampled under the turn's limit, stopping at its call's end
            if self.use_vllm:
                self.turn_limits.configure_vllm(self.vllm_generation)
            else:
                self.generation_config = self.turn_limits.generation_config(self.generation_config)
                self.generation_kwargs = self.turn_limits.generation_kwargs(self.generation_kwargs)
        self.call_credit = CallCredit(args.call_credit)
        self.choice_credit = ChoiceCredit(args.choice_credit, self._tokenizer,
                                          self.turn_limits.spec if self.turn_limits.enabled else None, args.loss_type,
                                          self.temperature, self.max_completion_length, unwrapped)
        self.step_credit = StepCredit(args.step_credit, args.step_credit_weight, StepBranches(
            args.step_branches, self._tokenizer, self._single_environment(), EpisodeSettings.from_trainer(self, args.seed),
            self.turn_limits.spec if self.turn_limits.enabled else None, args.seed) if args.step_branches else None)
        self.environment_metrics = EnvironmentMetrics()
        self.dynamic_sampling = DynamicSampling(args, self.train_dataset, self.num_generations, args.seed,
                                                self.accelerator.process_index)
        judge_settings = JudgeSettings(retries=args.judge_retries, timeout_s=args.judge_timeout_s,
                                       max_failure_rate=args.judge_max_failure_rate, strict=self.flags.strict_traj_keys)
        self.reward_checks = RewardChecks(self.reward_funcs, args.judge_kwargs, judge_settings,
                                          args.reward_magnitude_limit, args.strict_health)
        self.zero_std = ZeroStdWatch(args.zero_std_warn_threshold, args.zero_std_warn_steps, args.dynamic_sampling)
        self.policy_head = PolicyTokenHead()
        self.value = ValueHeadFeature(args, unwrapped, self.accelerator, self.beta,
                                      self.is_deepspeed_enabled or self.is_fsdp_enabled, self.num_generations)
        self.heldout = HeldoutEvaluation(self, heldout_rows or [])

        self.health = HealthMonitorCallback(self)
        self.callback_handler.callbacks.insert(0, self.health)  # first, so every logger sees its values
        self.add_callback(MetricsJsonlCallback(args.output_dir))
        self.wall_time_guard = WallTimeGuardCallback(args.max_wall_time_s)
        self.add_callback(self.wall_time_guard)
        self.add_callback(OptimizerTimingCallback(train_metrics))
        gpu_memory = gpu_memory_callback(train_metrics, self.accelerator.device)
        if gpu_memory is not None:  # before the held-out evaluation: a step's peak is the step's own
            self.add_callback(gpu_memory)
        if self.heldout.rows and args.heldout_eval_steps:
            self.add_callback(HeldoutEvalCallback(self.heldout, args.heldout_eval_steps))
        sync_callback = self.reference.attach(unwrapped, self.accelerator, train_metrics)
        if sync_callback is not None:
            self.add_callback(sync_callback)
        if self.value.enabled:
            self.add_callback(ValueHeadStepCallback(self.value, lambda: self.optimizer))

    @property
    def _mode(self) -> str:
        return "train" if self.model.training else "eval"

    # ---- generation ---------------------------------------------------------------------------------------------
    def _generate_and_score_completions(self, inputs):
        metrics = self._metrics[self._mode]
        zero_std_seen = len(metrics["frac_reward_zero_std"])
        if self.dynamic_sampling.active(self._mode):
            batch = self.dynamic_sampling.collect(inputs, self._sampling_round, self.accelerator, metrics,
                                                  self._tokenizer.pad_token_id)
        else:
            batch = self._sampling_round(inputs)
        if self._mode == "train" and len(metrics["frac_reward_zero_std"]) > zero_std_seen:
            self.zero_std.after_batch(metrics["frac_reward_zero_std"][zero_std_seen], metrics)  # the first round's
        if self.record.due_for_logp_check(self._mode):
            self.record.log_logp_gap(batch, self._recompute_logps(batch), metrics)
        return batch

    def _sampling_round(self, inputs: list[dict]) -> dict:
        """One round: TRL generates and scores `inputs`; then what the loss needs joins the batch."""
        mode, metrics = self._mode, self._metrics[self._mode]
        self._round = _Round(
            forcing_plan=self.forcing.plan(inputs, self.state.global_step, mode, self.accelerator.process_index),
            skip_old_logp_forward=self.record.enabled and self._trl_recomputes_old_logps(),
        )
        try:
            batch = super()._generate_and_score_completions(inputs)
            scored = self._round
        finally:
            self._round = None
        self.environment_metrics.log(self.environments, self.accelerator, metrics)
        self.record.attach_old_logps(batch)
        if scored.rewards_per_func is None:
            raise RuntimeError("no rewards were computed for this generation batch")
        group_size = self.num_generations if mode == "train" else self.num_generations_eval
        batch["sequence_rewards"], batch["group_ids"] = local_rewards_and_groups(
            scored.rewards_per_func, self.reward_weights, len(inputs), self.accelerator.process_index, group_size
        )
        if self.call_credit.enabled or self.step_credit.enabled:  # per-call rewards, by model turn
            table = self.call_credit.table(batch, self.environments, scored.episode_tools, self.reward_func_names,
                                           self.reward_weights, scored.rewards_per_func, self.accelerator,
                                           require_terms=self.call_credit.enabled)
            if self.call_credit.enabled:  # per-token advantages from each call's reward, in place of TRL's per episode
                batch["advantages"] = self.call_credit.advantages(table, group_size, self.accelerator, metrics)
            if self.choice_credit.enabled:  # each choice token: the expected gradient over the offered choices
                self.choice_credit.attach(batch, table, scored.episode_tools, self.environments,
                                          dict(zip(self.reward_func_names, self.reward_weights.tolist(), strict=True)),
                                          group_size, self.accelerator, metrics)
            if self.step_credit.enabled:  # each call against the calls made from the same state
                samples = self.step_credit.value_samples(
                    self.accelerator.unwrap_model(self.model), inputs, batch, table, scored.episode_tools, group_size,
                    dict(zip(self.reward_func_names, self.reward_weights.tolist(), strict=True)),
                    self.state.global_step, metrics) if mode == "train" else {}
                batch["advantages"] = self.step_credit.advantages(batch["advantages"], table, scored.episode_tools,
                                                                  self.environments, group_size, self.accelerator,
                                                                  metrics, samples)
        self.forcing.mark(batch, scored.forcing_plan, self.accelerator, metrics)
        self.turn_limits.exclude_void(batch, scored.void_rollouts, self.accelerator)
        log_gradient_weight(batch, self.accelerator, metrics)
        self._check_batch(batch, mode)
        return batch

    def _built_here(self) -> bool:
        """Whether our `__init__` built this instance. TRL's own tests build trainer shells with `object.__new__` and
        only the attributes TRL's method needs; an override given such a shell behaves as TRL's method does."""
        return "tool_calls" in vars(self)

    def _generate(self, prompts):
        if not self._built_here():
            return super()._generate(prompts)
        metrics = self._metrics[self._mode]
        with timed(metrics, "generate"):
            counts = None
            self.call_credit.start()
            if self.tool_calls.enabled:  # TRL built one {name: tool} dict per rollout just before this call
                self._sync_tool_dicts, counts, episode_tools = self.tool_calls.wrap(
                    self._sync_tool_dicts, self.call_credit.clock, self.step_credit.state_readers(self.environments),
                    self.choice_credit.readers(self.environments))
                if self._round is not None:
                    self._round.episode_tools = episode_tools
            with self._turn_cache() as cache:
                result = super()._generate(prompts)
            if cache is not None:  # over all processes' tokens (every process gathers, whatever it generated)
                reused, fed = self.accelerator.gather(torch.tensor(
                    [[cache.reused_tokens, cache.fed_tokens]], device=self.accelerator.device)).sum(dim=0).tolist()
                if reused + fed:
                    metrics["turns/cache_reused"].append(reused / (reused + fed))
            if counts is not None:
                self.tool_calls.log(counts, self.accelerator, metrics)
            if self.turn_limits.enabled:
                forced = None if self._round is None else [p is not None for p in self._round.forcing_plan]
                tool_mask, void = self.turn_limits.after_generate(result[1], result[2], self.accelerator, metrics,
                                                                  forced)
                result = (*result[:2], tool_mask, *result[3:])
                if self._round is not None:
                    self._round.void_rollouts = void
        if self._round is not None:
            self._round.sampling_logps = result[4]
        return result

    def _turn_cache(self):
        """The tool loop's turns reuse the KV cache of the turns before them (training/tool_use/turn_cache.py), on the
        transformers sampler; vLLM keeps its own prefix cache."""
        if not self.tools or self.use_vllm or self.use_transformers_continuous_batching:
            return nullcontext()
        return TurnCache(self._tokenizer.pad_token_id).active(self.accelerator.unwrap_model(self.model_wrapped))

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        if not self._built_here():
            return super()._generate_single_turn(prompt_ids, images, multimodal_fields, num_generations,
                                                 has_tool_images)
        trl_turn = partial(super()._generate_single_turn, prompt_ids, images, multimodal_fields, num_generations,
                           has_tool_images)
        completion_ids, logprobs = self.record.sample_turn(
            trl_turn, self.accelerator.unwrap_model(self.model_wrapped), self.temperature,
            backend_records=self.use_vllm or self.use_transformers_continuous_batching,
        )
        completion_ids, logprobs = self.turn_limits.finish(completion_ids, logprobs)
        self.call_credit.turn_generated()
        rnd = self._round
        if rnd is not None and rnd.first_turn:
            rnd.first_turn = False  # turns after a tool result are always the policy's own
            completion_ids, logprobs = self.forcing.rewrite_first_turn(
                rnd.forcing_plan, prompt_ids, completion_ids, logprobs, self._policy_logps
            )
        return completion_ids, logprobs

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        metrics = self._metrics[self._mode]
        with timed(metrics, "score"):
            rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        rewards_per_func = self.reward_checks.check(rewards_per_func, self.reward_func_names, metrics,
                                                    self._pending_metrics)
        if self._round is not None:
            self._round.rewards_per_func = rewards_per_func
        return rewards_per_func

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, *args, **kwargs):
        rnd, loss = self._round, self._loss
        if rnd is not None and rnd.skip_old_logp_forward and not torch.is_grad_enabled():
            # TRL's old-log-prob forward (its first no-grad policy forward while scoring a generation batch): answered
            # from the log-probs recorded at sampling time instead of running the model.
            rnd.skip_old_logp_forward = False
            recorded = recorded_logps_tensor(rnd.sampling_logps, input_ids.size(0), logits_to_keep, input_ids.device)
            return recorded, None, None
        if loss is None or loss.forward_seen or not torch.is_grad_enabled():
            return super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, *args, **kwargs
            )
        # TRL's loss forward, its head scoring the loss mask's tokens only: the value head reads its hidden states,
        # the ratio statistics its log-probs.
        loss.forward_seen = True
        trl_forward = partial(super()._get_per_token_logps_and_entropies, model, input_ids, attention_mask,
                              logits_to_keep, *args, **kwargs)
        with self.value.capturing(), self.choice_credit.capturing():
            result = self.policy_head.forward(trl_forward, model, loss.batch, logits_to_keep)
            if self.value.enabled:
                loss.values = self.value.values_and_advantages(loss.batch, logits_to_keep, result[0])
        self.record.log_ratio(result[0], loss.batch, self._metrics[self._mode])
        return result

    # ---- loss ---------------------------------------------------------------------------------------------------
    def _compute_loss(self, model, inputs):
        mode, metrics = self._mode, self._metrics[self._mode]
        with timed(metrics, "loss"):
            self._check_batch(inputs, mode)
            self.forcing.check_loss_batch(inputs, self.state.global_step, self.accelerator, metrics)
            self.record.mask_unscorable(inputs, metrics)
            metrics["trajectory/empty_loss_mask"].append(float(loss_mask(inputs).sum().item() == 0))
            self._loss = _LossPass(inputs)
            try:
                loss = super()._compute_loss(model, inputs)
                values = self._loss.values
            finally:
                self._loss = None
            normalizer = self.current_gradient_accumulation_steps if mode == "train" else 1.0
            if self.value.enabled:
                if values is None:
                    raise RuntimeError("value head: the loss forward did not pass through the value head")
                loss = loss + self.value.loss(values, inputs, metrics, normalizer)
            choice = self.choice_credit.loss(model, inputs, metrics, normalizer, self.accelerator.num_processes,
                                             self.args.steps_per_generation if mode == "train" else 1)
            if choice is not None:
                loss = loss + choice
            sft = self.forcing.sft_term(inputs, partial(self._completion_logps, model), metrics, normalizer)
            if sft is not None:
                loss = loss + sft
        return loss

    # ---- optimizer ----------------------------------------------------------------------------------------------
    def create_optimizer(self, model=None):
        optimizer = super().create_optimizer(model)
        if self.value.enabled:
            self.value.add_to_optimizer(optimizer)
        return optimizer

    def _clip_grad_norm(self, model):
        if not self.value.enabled:
            return super()._clip_grad_norm(model)
        params = [*model.parameters(), *self.value.params_with_grads()]
        return self.accelerator.clip_grad_norm_(params, self.args.max_grad_norm)

    def _get_grad_norm(self, model, grad_norm=None):
        if not self.value.enabled or grad_norm is not None:
            return super()._get_grad_norm(model, grad_norm=grad_norm)
        return self.accelerator.clip_grad_norm_([*model.parameters(), *self.value.params_with_grads()], math.inf)

    # ---- logging ------------------------------------------------------------------------------------------------
    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "loss" in logs:  # a training-step log, not the end-of-training summary
            logs["memory/rss_mb"] = rss_mb()
            self.reference.add_count(logs)
        resumed_at = getattr(self, "_initial_global_step", 0)
        if "train_loss" in logs and resumed_at > 0:  # a resumed run's end: the whole run's mean, not this call's
            logs["train_loss"], steps = whole_run_loss(self.state.log_history, resumed_at, self._total_loss_scalar,
                                                       self.state.global_step)
            if steps != self.state.global_step:
                logs["train_loss_steps"] = steps
        super().log(logs, start_time)
        if self.health.error is not None:
            raise self.health.error

    # ---- checkpoints --------------------------------------------------------------------------------------------
    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        if self.is_deepspeed_enabled and getattr(self, "deepspeed", None) is None:
            # a finished run resumed under DeepSpeed builds no engine (nothing to train): the model itself holds the
            # checkpoint's weights, where transformers' DeepSpeed branch would ask the engine for them
            if self.args.should_save:
                self._save(output_dir)
        else:
            super().save_model(output_dir, _internal_call)
        # under ZeRO-3 transformers' save leaves the frozen reference adapter out (training/features/reference.py)
        self.reference.save_partitioned(output_dir or self.args.output_dir, self.args.should_save)
        if self.value.enabled and self.args.should_save:
            self.value.save(output_dir or self.args.output_dir)

    def _save_checkpoint(self, model, trial):
        # A checkpoint counts only once complete (training/outputs/checkpoints.py): TRL's and transformers' files, then the
        # features' state, then the completion marker.
        save_complete_checkpoint(self, partial(self._save_checkpoint_files, model, trial))

    def _save_checkpoint_files(self, model, trial) -> None:
        super()._save_checkpoint(model, trial)
        if self.args.should_save:
            checkpoint = Path(self._get_output_dir(trial=trial)) / f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
            (checkpoint / FEATURE_STATE_FILE).write_text(json.dumps(self._feature_state(), indent=2))

    def _load_from_checkpoint(self, resume_from_checkpoint, model=None):
        super()._load_from_checkpoint(resume_from_checkpoint, model)
        if not self.is_deepspeed_enabled or getattr(self, "deepspeed", None) is None:  # an engine: see below
            self._restore_strict_state(resume_from_checkpoint, load_reference=False)

    def _load_optimizer_and_scheduler(self, checkpoint):
        super()._load_optimizer_and_scheduler(checkpoint)
        # transformers resumes a DeepSpeed engine with `deepspeed_load_checkpoint`, never `_load_from_checkpoint`
        if checkpoint is not None and self.is_deepspeed_enabled:
            self._restore_strict_state(checkpoint, load_reference=True)

    def _restore_strict_state(self, resume_from_checkpoint, load_reference: bool) -> None:
        """The reference adapter (its weights too where transformers did not load them), the value head and the
        features' state of a checkpoint."""
        self.reference.restore(resume_from_checkpoint, load_weights=load_reference)
        if self.value.enabled:
            self.value.load(resume_from_checkpoint)
        path = Path(resume_from_checkpoint) / FEATURE_STATE_FILE
        if not path.is_file():
            raise MissingPathError(f"checkpoint {resume_from_checkpoint!r} has no {FEATURE_STATE_FILE}: the strict "
                                   "features' state (dynamic-sampling draws, zero-std streak) cannot be restored")
        for name, state in json.loads(path.read_text()).items():
            self._stateful_features()[name].load_state_dict(state)

    def _stateful_features(self) -> dict:
        return {"record_at_sample": self.record, "dynamic_sampling": self.dynamic_sampling,
                "zero_std_watch": self.zero_std}

    def _feature_state(self) -> dict:
        return {name: feature.state_dict() for name, feature in self._stateful_features().items()}

    # ---- helpers the step calls ---------------------------------------------------------------------------------
    def _check_batch(self, batch: dict, mode: str) -> None:
        required = self.record.required_keys() | ({"ref_per_token_logps"} if self.beta != 0.0 else set())
        check_generation_batch(batch, self.flags.strict_traj_keys, self._metrics[mode], required_extra=required)

    def _single_environment(self):
        """The run's one environment factory; None without one, or with several (TRL's dict `environment_factory`)."""
        factories = self.environment_factories or {}
        return factories.get(None) if len(factories) == 1 else None

    def _trl_recomputes_old_logps(self) -> bool:
        # The condition under which GRPOTrainer._generate_and_score_completions runs a no-grad policy forward for
        # `old_per_token_logps`.
        generate_every = self.args.steps_per_generation * self.num_iterations
        return self.args.gradient_accumulation_steps % generate_every != 0 or (
            self.use_vllm and self.vllm_importance_sampling_correction
        )

    @torch.no_grad()
    def _recompute_logps(self, batch: dict) -> torch.Tensor:
        return self._completion_logps(self.model, batch)

    def _completion_logps(self, model, batch: dict) -> torch.Tensor:
        input_ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
        attention = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
        logps, _, _ = self._get_per_token_logps_and_entropies(model, input_ids, attention,
                                                              batch["completion_ids"].size(1))
        return logps

    def _policy_logps(self, prompts: list[list[int]], completions: list[list[int]]) -> list[list[float]]:
        return policy_logps(self.accelerator.unwrap_model(self.model), prompts, completions, self.temperature,
                            self._tokenizer.pad_token_id, self.accelerator.device)

    def is_reuse_pass(self) -> bool:
        """Whether the step just taken reused a generation batch seen by an earlier step (`num_iterations > 1`)."""
        generate_every = self.args.steps_per_generation * self.num_iterations
        steps_into_batch = (self._step - 1) % generate_every
        return steps_into_batch >= self.args.steps_per_generation

    # ---- held-out reward (training/evaluation/trainer_heldout.py) -----------------------------------------------------------------
    def evaluate_heldout(self) -> dict[str, float]:
        return self.heldout.evaluate()

    @property
    def heldout_rows(self) -> list[dict]:
        return self.heldout.rows

    @heldout_rows.setter
    def heldout_rows(self, rows: list[dict]) -> None:
        self.heldout.rows = rows

    @property
    def heldout_history(self) -> list[dict]:
        return self.heldout.history
