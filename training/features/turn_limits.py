"""Turn limits: every model turn of a tool run ends at its call or at `max_turn_tokens`, and void turns have a rule.

TRL 1.16 samples every turn of its tool loop with `max_new_tokens = max_completion_length` and stops a turn only at
an end-of-turn token, so one turn that misses its `<|im_end|>` after a call may run on into the episode's whole
budget, and its many low-probability tokens then carry most of the step's gradient. This feature puts
training/tool_use/turn_end.py's rule on TRL's sampler:

- `max_turn_tokens` caps every turn: the transformers sampler's generation config (`max_new_tokens`) and vLLM's
  per-request `max_tokens` (`VLLMGeneration.max_completion_length`, which TRL reads at every request) are the turn's
  limit; the episode's budget (`max_completion_length`) still cuts the episode as TRL cuts it. Unset, a tool run's
  limit is `min(256, max_completion_length // 2)`; the run logs which one is in force (`turns/limit` too).
- `end_turn_at_call` (on by default): the sampler also stops at the call's closing token (`</tool_call>`; vLLM:
  `stop_token_ids`), and the template's tail after it (`<|im_end|>`) is appended unsampled, with a log-prob of 0 and
  `tool_mask` 0 (out of the loss, as a tool result's tokens are).
- void turns (cut by the limit or the episode's budget, or ending in an unclosed call) are counted per generation
  batch, and `void_turn_rule` says what the loss does with them: `credit` (default: the episode stays in the loss,
  each turn with the advantage it has, the episode's or `call_credit`'s own-reward rule, so a malformed call is
  pushed down) or `exclude` (SimpleTIR, arXiv 2509.02479: an episode with a void turn leaves the loss, its reward
  still counts in its group's baseline and its tokens in the normaliser). On the CBO file `exclude` let malformed
  calls spread with nothing against them (one seed of three stopped at step 20; `credit` ran all three to the end:
  docs/results/causal.md §3.0).

Metrics of each generation batch (all processes): `turns/count`, `turns/cut`, `turns/void`, `turns/void_episodes`,
`turns/mean_tokens`, `turns/max_tokens` (a turn's sampled tokens, appended ones excluded) and `turns/limit`; a first
turn written by forcing (features/forcing.py) is not sampled and not counted.
`health/turn_lengthening` reads them (training/step/health.py).
"""

from __future__ import annotations

import copy
import logging

import torch

from training.algorithms.trajectory import loss_mask
from training.errors import BadInputError
from training.tool_use.turn_end import (TurnEnd, TurnEndError, TurnRecord, completion_turns, resolved_limit,
                                        turn_end)

logger = logging.getLogger(__name__)


class TurnLimitError(BadInputError):
    """A turn-limit setting that cannot apply to this run; the message names the field."""


class TurnLimits:
    """See the module docstring. `enabled`: the run has tools (a multi-turn tool loop)."""

    def __init__(self, args, tokenizer, chat_template, template_kwargs: dict, stop_ids, has_tools: bool,
                 rollout_func=None):
        self.enabled = has_tools
        self.rule = args.void_turn_rule
        self.spec: TurnEnd | None = None
        if not has_tools:
            if args.max_turn_tokens is not None:
                raise TurnLimitError(f"max_turn_tokens={args.max_turn_tokens} is set but the run has no tools: its "
                                     "one turn is the completion (max_completion_length)")
            return
        limit, source = resolved_limit(args.max_turn_tokens, args.max_completion_length)
        try:
            self.spec = turn_end(tokenizer, chat_template, template_kwargs, limit, stop_ids, args.end_turn_at_call)
        except TurnEndError as err:
            raise TurnLimitError(str(err)) from None
        ends = ("at its call's closing token (the template's tail appended unsampled) or" if args.end_turn_at_call
                else "only at")
        logger.info("turn limit in force: %d tokens a turn (%s); a turn ends %s its end-of-turn token; void turns: "
                    "%s", limit, source, ends, self.rule)
        if rollout_func is not None:
            logger.warning("rollout_func: the first turn is the rollout function's own; max_turn_tokens=%d and "
                           "end_turn_at_call apply to the turns TRL's tool loop samples after it", limit)

    @property
    def limit(self) -> int | None:
        return self.spec.limit if self.spec is not None else None

    # ---- the sampler ------------------------------------------------------------------------------------------------
    def generation_config(self, config):
        """TRL's one generation config made a turn's: `max_new_tokens` the turn limit, stopping at the closing token."""
        turn = copy.deepcopy(config)
        turn.max_new_tokens = self.spec.limit
        turn.eos_token_id = self.spec.sampler_stops
        return turn

    def generation_kwargs(self, kwargs: dict) -> dict:
        """TRL's `generation_kwargs` (what it writes over the model's own generation config) made a turn's."""
        return {**kwargs, "max_new_tokens": self.spec.limit, "eos_token_id": self.spec.sampler_stops}

    def configure_vllm(self, vllm_generation) -> None:
        """vLLM (colocate or server): every request's `max_tokens` is the turn limit (TRL passes
        `VLLMGeneration.max_completion_length` as `max_tokens` at each request) and it stops at the closing token
        (`stop_token_ids` in `generation_kwargs`, which TRL hands to `SamplingParams` or the server)."""
        vllm_generation.max_completion_length = self.spec.limit
        if self.spec.call_close is not None:
            extra = dict(vllm_generation.generation_kwargs or {})
            stops = list(extra.get("stop_token_ids") or [])
            extra["stop_token_ids"] = [*stops, *([self.spec.call_close] if self.spec.call_close not in stops else [])]
            vllm_generation.generation_kwargs = extra

    def finish(self, completion_ids: list[list[int]], logprobs: list[list[float]] | None):
        """One sampled turn per row ended by the rule; appended tokens get a log-prob of 0 (they leave the loss)."""
        if not self.enabled:
            return completion_ids, logprobs
        ended, kept_logprobs = [], [] if logprobs is not None else None
        for n, ids in enumerate(completion_ids):
            turn, appended = self.spec.finish(list(ids))
            ended.append(turn)
            if logprobs is not None:
                kept_logprobs.append([*logprobs[n][: len(turn) - appended], *[0.0] * appended])
        return ended, kept_logprobs

    # ---- the generation batch ---------------------------------------------------------------------------------------
    def after_generate(self, completion_ids: list[list[int]], tool_mask: list[list[int]], accelerator,
                       metrics: dict, forced: list[bool] | None = None) -> tuple[list[list[int]], list[bool]]:
        """(`tool_mask` with the appended tokens at 0, which rollouts have a void turn); logs `turns/*`. `forced`:
        the rollouts whose first turn was written by forcing (features/forcing.py), not sampled: it is not counted."""
        if tool_mask is None:
            raise RuntimeError("turn limits: TRL's tool loop returned no tool_mask, so the model's turns cannot be "
                               "told from the tool results")
        turns = [completion_turns(ids, mask, self.spec) for ids, mask in zip(completion_ids, tool_mask, strict=True)]
        if forced is not None:
            turns = [rollout[1:] if was_forced else rollout for rollout, was_forced in zip(turns, forced, strict=True)]
        masked = [appended_masked(ids, mask, self.spec) for ids, mask in zip(completion_ids, tool_mask, strict=True)]
        void = [any(t.void for t in rollout) for rollout in turns]
        self._log(turns, void, accelerator, metrics)
        return masked, void

    def _log(self, turns: list[list[TurnRecord]], void: list[bool], accelerator, metrics: dict) -> None:
        flat = [t for rollout in turns for t in rollout]
        device = accelerator.device
        sums = torch.tensor([[len(flat), sum(t.cut for t in flat), sum(t.void for t in flat), sum(void),
                              sum(t.tokens for t in flat)]], dtype=torch.float64, device=device)
        longest = torch.tensor([max((t.tokens for t in flat), default=0)], dtype=torch.float64, device=device)
        count, cut, void_turns, void_episodes, tokens = accelerator.gather(sums).sum(dim=0).tolist()
        metrics["turns/count"].append(count)
        metrics["turns/cut"].append(cut)
        metrics["turns/void"].append(void_turns)
        metrics["turns/void_episodes"].append(void_episodes)
        metrics["turns/mean_tokens"].append(tokens / count if count else 0.0)
        metrics["turns/max_tokens"].append(float(accelerator.gather(longest).max().item()))
        metrics["turns/limit"].append(float(self.spec.limit))

    def exclude_void(self, batch: dict, void: list[bool] | None, accelerator) -> None:
        """`void_turn_rule: exclude`: the rollouts with a void turn leave the loss (`tool_mask` 0); their tokens
        stay in the loss's normaliser (`void_tokens`, `trajectory.loss_tokens`), so a mostly void batch takes a small
        step. In place."""
        if not self.enabled or self.rule != "exclude" or void is None:
            return
        if len(void) != batch["completion_ids"].size(0):
            raise RuntimeError(f"void turns known for {len(void)} rollouts, the batch has "
                               f"{batch['completion_ids'].size(0)}")
        keep = torch.tensor([not v for v in void], device=batch["completion_ids"].device)
        batch["void_tokens"] = loss_mask(batch).sum(dim=1) * (~keep).to(torch.long)
        if any(void):
            tool_mask = batch.get("tool_mask", torch.ones_like(batch["completion_mask"]))
            batch["tool_mask"] = tool_mask * keep.unsqueeze(1).to(tool_mask.dtype)


def appended_masked(completion_ids: list[int], tool_mask: list[int], spec: TurnEnd) -> list[int]:
    """`tool_mask` with every model turn's tokens after its call's closing token (the appended tail) at 0."""
    if spec.call_close is None:
        return list(tool_mask)
    out, in_turn_after_close = list(tool_mask), False
    for n, (token, bit) in enumerate(zip(completion_ids, tool_mask, strict=True)):
        if not bit:
            in_turn_after_close = False
        elif in_turn_after_close:
            out[n] = 0
        elif token == spec.call_close:
            in_turn_after_close = True
    return out
