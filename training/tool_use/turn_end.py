"""Where a model turn of a multi-turn tool episode ends: at its call's closing token, or at the per-turn limit.

TRL 1.16 samples every turn of its tool loop with one generation config whose `max_new_tokens` is the episode's
budget (`max_completion_length`), and a turn stops only at an end-of-turn token (`<|im_end|>`, `<|endoftext|>`): a turn
that misses its `<|im_end|>` after a call runs on into the episode's budget. `TurnEnd` is the rule both samplers
(training, training/features/turn_limits.py; the held-out loop, training/evaluation/tool_loop.py) apply to every turn:

- the sampler stops at the end-of-turn tokens and at the call's closing token (`</tool_call>`, one token in Qwen3's
  tokenizers), and never samples more than `limit` tokens in one turn (`max_turn_tokens`);
- a turn that stops at the closing token gets what the chat template writes after it (`tail`: `<|im_end|>` for
  Qwen3, the EOS that TRL's `_get_tool_suffix_ids` expects a turn to end with) appended, never sampled. The training
  sampler keeps appended tokens out of the loss (`tool_mask` 0, like a tool result's tokens).

So a turn holds at most one call, and a well-formed turn never depends on sampling its end-of-turn token.

A turn is *cut* when it reached `limit` tokens without ending, and *void* when it did not end (cut by the limit, or by
the episode's budget) or ended with a call it opened and never closed (`<tool_call>` without `</tool_call>`). A turn
that ends with a plain answer is not void.
"""

from __future__ import annotations

from dataclasses import dataclass

CALL_OPEN = "<tool_call>"
CALL_CLOSE = "</tool_call>"
DEFAULT_TURN_TOKENS = 256  # the default limit's ceiling: far above a JSON call of the bundled tasks (at most 39 tokens)


def resolved_limit(max_turn_tokens: int | None, max_completion_length: int) -> tuple[int, str]:
    """(the turn limit in force, where it comes from, in words). Unset: min(256, max_completion_length // 2), a limit
    below the episode's budget, so no one turn can take the whole episode; set above the budget (a recipe's limit with
    a budget lowered for a quick evaluation): the budget."""
    if max_turn_tokens is not None and max_turn_tokens > max_completion_length:
        return max_completion_length, (f"max_turn_tokens={max_turn_tokens} is above max_completion_length="
                                       f"{max_completion_length}: the episode's budget")
    if max_turn_tokens is not None:
        return max_turn_tokens, "max_turn_tokens, the recipe's"
    limit = max(1, min(DEFAULT_TURN_TOKENS, max_completion_length // 2))
    return limit, (f"the default min({DEFAULT_TURN_TOKENS}, max_completion_length // 2); set max_turn_tokens to fit "
                   "the task's calls")


class TurnEndError(ValueError):
    """The chat template or tokenizer does not let a turn end at its call; the message names the setting."""


@dataclass(frozen=True)
class TurnEnd:
    """The per-turn rule (module docstring). `call_close` None: turns end at their end-of-turn tokens only."""

    limit: int
    stop_ids: tuple[int, ...]  # the sampler's end-of-turn tokens (EOS)
    call_open: int | None = None
    call_close: int | None = None
    tail: tuple[int, ...] = ()  # appended after `call_close`

    @property
    def sampler_stops(self) -> list[int]:
        """Every token the sampler stops a turn at."""
        return [*self.stop_ids, *([self.call_close] if self.call_close is not None else [])]

    def finish(self, ids: list[int]) -> tuple[list[int], int]:
        """A turn as the sampler returned it (possibly padded past its stop, possibly longer than `limit`) ended by
        the rule: `(its tokens, how many of them were appended)`."""
        for n, token in enumerate(ids[: self.limit]):
            if token in self.stop_ids:
                return list(ids[: n + 1]), 0
            if token == self.call_close:
                return [*ids[: n + 1], *self.tail], len(self.tail)
        return list(ids[: self.limit]), 0


@dataclass(frozen=True)
class TurnRecord:
    """One model turn of a finished completion: its sampled tokens (appended ones excluded), whether it was cut by
    the limit, whether it is void, and how many appended tokens follow it."""

    tokens: int
    cut: bool
    void: bool
    appended: int


def completion_turns(completion_ids: list[int], tool_mask: list[int], spec: TurnEnd) -> list[TurnRecord]:
    """The model turns of one completion of TRL's tool loop (the runs of `tool_mask == 1`), each classified by the
    rule (module docstring). The tokens after a turn's closing token are the appended ones."""
    turns, start = [], None
    for n, bit in enumerate([*tool_mask, 0]):
        if bit and start is None:
            start = n
        elif not bit and start is not None:
            turns.append(_classify(completion_ids[start:n], spec))
            start = None
    return turns


def _classify(ids: list[int], spec: TurnEnd) -> TurnRecord:
    if spec.call_close is not None and spec.call_close in ids:
        close = ids.index(spec.call_close)
        appended = len(ids) - close - 1
        if list(ids[close + 1:]) != list(spec.tail[:appended]):
            raise RuntimeError(f"a model turn goes on after its call's closing token with {ids[close + 1:]}, not the "
                               f"template's {list(spec.tail)}: the sampler did not stop at the closing token")
        sampled = close + 1
        return TurnRecord(tokens=sampled, cut=False, void=_unclosed(ids[:sampled], spec), appended=appended)
    ended = bool(ids) and ids[-1] in spec.stop_ids
    cut = not ended and len(ids) >= spec.limit
    return TurnRecord(tokens=len(ids), cut=cut, void=not ended or _unclosed(ids, spec), appended=0)


def _unclosed(ids: list[int], spec: TurnEnd) -> bool:
    if spec.call_open is None:
        return False
    closes = ids.count(spec.call_close) if spec.call_close is not None else 0
    return ids.count(spec.call_open) > closes


def single_token(tokenizer, text: str) -> int | None:
    """The id of `text` when the tokenizer writes it as one token, else None."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    return ids[0] if len(ids) == 1 else None


def call_tail(tokenizer, chat_template, template_kwargs: dict, close: int) -> tuple[int, ...]:
    """What the chat template writes after an assistant turn's call closing token up to and including its end-of-turn
    token, from a rendered dummy call (as TRL's `_get_tool_suffix_ids` renders one)."""
    messages = [{"role": "user", "content": "dummy"},
                {"role": "assistant", "content": "",
                 "tool_calls": [{"type": "function", "function": {"name": "dummy", "arguments": {}}}]}]
    ids = list(tokenizer.apply_chat_template(messages, add_generation_prompt=False, tokenize=True,
                                             chat_template=chat_template, return_dict=False, **template_kwargs))
    eos = [i for i, t in enumerate(ids) if t == tokenizer.eos_token_id]
    if close not in ids or not eos or eos[-1] < ids.index(close):
        raise TurnEndError(f"end_turn_at_call: the chat template does not write a call as {CALL_OPEN}...{CALL_CLOSE} "
                           "followed by its end-of-turn token; set end_turn_at_call: false")
    last_close = len(ids) - 1 - ids[::-1].index(close)
    return tuple(ids[last_close + 1: eos[-1] + 1])


def turn_end(tokenizer, chat_template, template_kwargs: dict, limit: int, stop_ids, end_at_call: bool) -> TurnEnd:
    """The rule for a tokenizer and chat template: stop at `stop_ids` (and, with `end_at_call`, at the call's closing
    token with the template's tail appended), at most `limit` tokens a turn."""
    stops = tuple(dict.fromkeys(int(t) for t in stop_ids))
    if not end_at_call:
        return TurnEnd(limit=limit, stop_ids=stops)
    close, open_ = single_token(tokenizer, CALL_CLOSE), single_token(tokenizer, CALL_OPEN)
    if close is None or open_ is None:
        raise TurnEndError(f"end_turn_at_call: the tokenizer writes {CALL_OPEN!r} / {CALL_CLOSE!r} as several tokens, "
                           "so a turn cannot stop at its call's closing token; set end_turn_at_call: false")
    return TurnEnd(limit=limit, stop_ids=stops, call_open=open_, call_close=close,
                   tail=call_tail(tokenizer, chat_template, template_kwargs, close))
