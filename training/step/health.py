"""Health detectors for the failures that make a broken RL run look like a working one.

Each logged training step is checked for:
- `health/zero_loss`: the loss is exactly 0 and no gradient flows (every advantage is 0: all rewards equal in every
  group, a reward function returning constants, or a masked-out batch);
- `health/all_groups_zero_std`: every group's rewards are equal, so the step carries no learning signal;
- `health/ratio_pinned`: on a reuse pass of a generation batch (`num_iterations > 1`) the PPO ratio is exactly 1 with
  zero spread, i.e. the "old" log-probs were recomputed with the current policy;
- `health/nonfinite_loss`: the loss or the gradient norm is NaN or infinite (non-finite loss or gradient);
- `health/no_valid_calls`: the environment reports how many tool calls per rollout it accepted (`tools/valid_calls`,
  the causal environment does) and no rollout of the step made one: the policy cannot act on this environment yet
  (it names things the environment does not have, or writes calls the tool layer cannot parse). The warning names
  what the step's logs show: the malformed calls by kind (`tools/malformed/*`, in the generation batch) and the calls
  the environment refused by kind (`tools/refused/*`, per rollout: `unknown_variable` where the policy names
  variables the SCM does not have). A warning, not a stop: the zero-loss detector stops such a run;
- `health/grad_spike`: the gradient norm is finite, more than `grad_spike_factor` (k) times the median of the
  last `GRAD_WINDOW` finite, non-zero gradient norms that were not spikes themselves (once at least
  `grad_spike_warmup` of those were seen; steps without any signal have a gradient norm of exactly 0 and are left out
  of the median; a spike left in would raise its own reference, and a run that stays at the jumped norms would stop
  firing: a CBO run collapsed so, its completions growing to the length limit, without a stop), and above the floor
  `grad_spike_floor` x `max_grad_norm` (x 1 without clipping). The floor is what a near-deterministic policy needs:
  its gradients are ~1e-4 on groups it is sure of and ~1e-2 on one it is not, a hundredfold jump that is no
  instability, while a jump to a sizeable fraction of the clipping threshold still is;
- `health/turn_lengthening`: in a tool run, the share of the step's model turns cut at `max_turn_tokens`
  (`turns/cut` / `turns/count`, training/features/turn_limits.py) is at least `turn_cut_rise` above its median over
  the last `TURN_WINDOW` steps that did not fire (once `TURN_WARMUP` of those were seen): the policy's turns are
  running on. A run collapses so, its turns growing over two or three steps before its calls break; a share that is
  high from the start (a limit too small for the task's calls, an untrained policy) is no lengthening and does not
  fire. Firing steps stay out of the median's window, so a run that stays at the risen share keeps firing.
Each detection is counted in the step's logs (1.0 or 0.0, so `metrics.jsonl` shows every step). When one persists
for `health_patience` consecutive logged steps (`health/nonfinite_loss`: at once) and `strict_health` is on, the run
stops with a message that says what is wrong and where to look, after saving a checkpoint
(`training.outputs.checkpoints.train_saving_on_stop`). Under `strict_health` a non-finite gradient is caught before the
optimizer applies it (`on_pre_optimizer_step`), so the checkpoint saved holds the last finite weights.

Streaks and the gradient-norm window are rebuilt from the checkpoint's log history on resume.
"""

from __future__ import annotations

import logging
import math
import statistics
from collections import defaultdict, deque

import torch
from transformers import TrainerCallback

from training.outputs.checkpoints import SaveBeforeStopping

logger = logging.getLogger(__name__)

GRAD_WINDOW = 20  # finite, non-zero gradient norms the spike detector's median is taken over
TURN_WINDOW = 20  # steps whose share of cut turns the lengthening detector's median is taken over
TURN_WARMUP = 5  # such steps to see before it may fire


class RunHealthError(SaveBeforeStopping, RuntimeError):
    """A health detector fired for `health_patience` consecutive steps (a non-finite loss: once) under
    `strict_health`."""


ADVICE = {
    "health/zero_loss": "the loss is exactly 0 and the gradient norm is 0: every advantage is 0, or no token is in "
    "the loss. Check that the reward functions return varied scores (rewards/*/std in metrics.jsonl) and that the "
    "loss mask is not empty (in a tool run under void_turn_rule: exclude, turns/void_episodes counts the episodes it "
    "keeps out of the loss; a policy whose every turn is void needs a warm start, or void_turn_rule: credit)",
    "health/all_groups_zero_std": "every group's rewards are identical (frac_reward_zero_std = 1): GRPO has no signal. "
    "Check the reward functions, raise num_generations or temperature, or enable dynamic sampling",
    "health/ratio_pinned": "the PPO ratio is exactly 1.0 with zero spread on a reuse pass: the old log-probs were "
    "recomputed with the current policy. Keep PPO_RECORD_AT_SAMPLE=1",
    "health/nonfinite_loss": "the loss or the gradient norm is NaN or infinite. Check the rewards (rewards/nan_count, "
    "huge values), lower learning_rate, keep max_grad_norm > 0, and use fp32 or bf16 rather than fp16",
    "health/grad_spike": "the gradient norm jumped above grad_spike_factor times the median of the recent ones. Check "
    "the rewards' scale (rewards/*/std), lower learning_rate, or raise grad_spike_factor or grad_spike_floor if such "
    "jumps are expected",
    "health/turn_lengthening": "the share of model turns cut at max_turn_tokens rose above its recent median: the "
    "policy's turns are running on, which comes before its calls break. Lower learning_rate (or raise "
    "max_grad_norm's clipping); check that max_turn_tokens fits the task's longest well-formed turn (turns/max_tokens "
    "of the first steps), or raise turn_cut_rise if such rises are expected",
    "health/no_valid_calls": "no rollout made a tool call the environment accepted, so no reward can tell the "
    "rollouts apart: the policy cannot act on this environment yet. Check that the model was trained on this "
    "environment's call format and names (a starting policy or warm start on the same kind of rows)",
}
IMMEDIATE = ("health/nonfinite_loss",)  # stop at the first occurrence under strict_health
WARN_ONLY = ("health/no_valid_calls",)  # said in words at the step; another detector stops such a run
PER_SAMPLING_BATCH = ("health/turn_lengthening",)  # read from the generation batch's metrics, absent on reuse passes
CALL_CAUSES = ("tools/malformed/", "tools/refused/")  # per-kind counts of the calls that were not accepted


def no_valid_calls_causes(logs: dict) -> str:
    """The causes a step's logs show for its rollouts making no valid call: each malformed or refused kind seen, with
    its value as logged (`tools/malformed/*`: calls in the generation batch; `tools/refused/*`: per rollout)."""
    seen = [f"{name.split('/', 1)[1]} {value:g}" for name, value in sorted(logs.items())
            if name.startswith(CALL_CAUSES) and _finite(value) and value > 0]
    return "; ".join(seen) if seen else "no malformed or refused calls counted: the rollouts made no call at all"


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def cut_share(logs: dict) -> float | None:
    """The share of the step's model turns cut at `max_turn_tokens` (None: the step sampled no turns)."""
    count, cut = logs.get("turns/count"), logs.get("turns/cut")
    if not (_finite(count) and _finite(cut)) or count <= 0:
        return None
    return cut / count


def detect(
    logs: dict,
    reuse_pass: bool,
    recent_grad_norms: list[float] | tuple[float, ...] = (),
    spike_factor: float = 10.0,
    spike_warmup: int = 5,
    spike_floor: float = 0.0,
    recent_cut_shares: list[float] | tuple[float, ...] = (),
    cut_rise: float = 0.1,
) -> dict[str, bool]:
    """Which detectors fire for one training-step log. Pure: tested alone.

    `recent_grad_norms`: the finite, non-zero, non-spike gradient norms of the steps before this one (at most
    `GRAD_WINDOW`);
    `spike_factor` 0 disables the spike detector; a gradient norm at or below `spike_floor` is never a spike.
    `recent_cut_shares`: the shares of cut turns of the steps before this one that did not fire (at most
    `TURN_WINDOW`); `cut_rise` 0 disables the lengthening detector."""
    loss, grad_norm = logs.get("loss"), logs.get("grad_norm")
    recent = [g for g in recent_grad_norms if _finite(g) and g > 0][-GRAD_WINDOW:]
    spike = (
        spike_factor > 0
        and _finite(grad_norm)
        and len(recent) >= max(spike_warmup, 1)
        and grad_norm > spike_factor * statistics.median(recent)
        and grad_norm > spike_floor
    )
    share, shares = cut_share(logs), list(recent_cut_shares)[-TURN_WINDOW:]
    lengthening = (
        cut_rise > 0
        and share is not None
        and len(shares) >= TURN_WARMUP
        and share >= statistics.median(shares) + cut_rise
    )
    return {
        "health/zero_loss": loss == 0.0 and grad_norm == 0.0,
        "health/all_groups_zero_std": logs.get("frac_reward_zero_std") == 1.0,
        "health/ratio_pinned": reuse_pass and logs.get("ratio/std") == 0.0 and logs.get("ratio/mean") == 1.0,
        "health/nonfinite_loss": any(v is not None and not _finite(v) for v in (loss, grad_norm)),
        "health/grad_spike": bool(spike),
        "health/no_valid_calls": logs.get("tools/valid_calls") == 0.0,
        "health/turn_lengthening": bool(lengthening),
    }


def spike_floor(args) -> float:
    """The gradient norm at or below which `health/grad_spike` never fires: `grad_spike_floor` x the clipping
    threshold `max_grad_norm` (x 1 when gradients are not clipped)."""
    clip = args.max_grad_norm if args.max_grad_norm and args.max_grad_norm > 0 else 1.0
    return args.grad_spike_floor * clip


def nonfinite_gradients(model) -> int:
    """How many parameter tensors of `model` hold a NaN or infinite gradient."""
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    if not grads:
        return 0
    return int(torch.stack([~torch.isfinite(g).all() for g in grads]).sum().item())


class HealthMonitorCallback(TrainerCallback):
    """Adds the detector values to each training-step log; when one persists under `strict_health` it leaves a
    `RunHealthError` in `self.error` for the trainer to raise once the log line has been written. Under
    `strict_health` it also raises before an optimizer step whose gradient is not finite."""

    def __init__(self, trainer):
        self.trainer = trainer
        self.streaks: dict[str, int] = defaultdict(int)
        self.grad_norms: deque[float] = deque(maxlen=GRAD_WINDOW)
        self.cut_shares: deque[float] = deque(maxlen=TURN_WINDOW)
        self.error: RunHealthError | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        """On resume, rebuild the streaks and the gradient-norm window from the checkpoint's log history."""
        self.streaks.clear()
        self.grad_norms.clear()
        self.cut_shares.clear()
        for logs in state.log_history:
            if "loss" not in logs:
                continue
            for name in ADVICE:
                if name in PER_SAMPLING_BATCH and cut_share(logs) is None:
                    continue
                if name in logs:
                    self.streaks[name] = self.streaks[name] + 1 if logs[name] else 0
            self._remember(logs, bool(logs.get("health/grad_spike")), bool(logs.get("health/turn_lengthening")))

    def _remember(self, logs: dict, spike: bool, lengthening: bool) -> None:
        grad_norm, share = logs.get("grad_norm"), cut_share(logs)
        if _finite(grad_norm) and grad_norm > 0 and not spike:
            self.grad_norms.append(float(grad_norm))
        if share is not None and not lengthening:
            self.cut_shares.append(share)

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        if not args.strict_health or model is None:
            return
        bad = nonfinite_gradients(model)
        if bad:
            raise RunHealthError(
                f"health/nonfinite_loss: the gradient of step {state.global_step + 1} is NaN or infinite in {bad} "
                f"parameter tensor(s); the update was not applied, so a checkpoint of step {state.global_step} holds "
                f"the last finite weights: {ADVICE['health/nonfinite_loss']}. Set strict_health=false to only warn."
            )

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or "loss" not in logs:
            return
        fired = detect(
            logs,
            reuse_pass=self.trainer.is_reuse_pass(),
            recent_grad_norms=list(self.grad_norms),
            spike_factor=args.grad_spike_factor,
            spike_warmup=args.grad_spike_warmup,
            spike_floor=spike_floor(args),
            recent_cut_shares=list(self.cut_shares),
            cut_rise=args.turn_cut_rise,
        )
        self._remember(logs, fired["health/grad_spike"], fired["health/turn_lengthening"])
        for name, hit in fired.items():
            logs[name] = float(hit)
            if name in PER_SAMPLING_BATCH and cut_share(logs) is None:
                continue  # a step that sampled nothing (a reuse pass) neither extends nor ends a streak
            self.streaks[name] = self.streaks[name] + 1 if hit else 0
            if hit and name == "health/no_valid_calls":
                logger.warning("step %d: %s. Calls not accepted, by kind: %s", state.global_step, ADVICE[name],
                               no_valid_calls_causes(logs))
            elif hit:
                logger.warning("step %d: %s", state.global_step, ADVICE[name])
            patience = 1 if name in IMMEDIATE else args.health_patience
            stops = args.strict_health and name not in WARN_ONLY
            if hit and stops and self.streaks[name] >= patience and self.error is None:
                streak = self.streaks[name]
                when = f"for {streak} consecutive steps (up to" if streak > 1 else "(at"
                self.error = RunHealthError(
                    f"{name} fired {when} step {state.global_step}): {ADVICE[name]}. Set strict_health=false to only "
                    "warn."
                )
