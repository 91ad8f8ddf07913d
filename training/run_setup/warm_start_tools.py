"""Supervised warm start on multi-turn tool-call traces, so GRPO begins from an agent that succeeds sometimes.

Each row's reference calls are run in a fresh environment; the trace (prompt, assistant tool call, tool result,
final answer) is rendered with the chat template GRPO samples with (TRL's prefix-preserving training template
when the tokenizer's own is not prefix-preserving) and the tools in the system prompt, and the loss is on the
assistant tokens only (the template's generation mask). Cached like `training.run_setup.warm_start`. With
`decisions=True` an encoded trace also marks its decision tokens (`decision_tokens`: the tokens that spell each tool
call's name and argument values, and with `stops` the token that opens each assistant turn's answer, where the
model decides whether to call again), for a loss that weighs them apart from the format
(`FineTuneSettings.decision_weight`).

`tool_call_rate` < 1 imitates a weaker teacher: every row also appears as a lazy trace (the prompt answered with
the final answer and no tool call), so that the warm-started policy acts on about that share of prompts, any prompt.
"""

from __future__ import annotations

import json
import re
from fractions import Fraction

from training.evaluation.tool_loop import environment_tools, sampling_chat_template
from training.run_setup.warm_start import FineTuneSettings, fine_tune_cached

FINAL_ANSWER = "Done."  # the last assistant turn of every trace, and the whole of a lazy one


def reference_trace(row: dict, tool_results: list[str], texts: list[str] | None = None) -> list[dict]:
    """The full conversation that solves `row`: its prompt, one assistant turn per reference call (each followed
    by its tool result), and the final answer. `tool_results` are what the environment returned for each call;
    `texts`, what each call's turn writes before its call (none by default)."""
    calls = json.loads(row["reference_calls_json"])
    texts = [""] * len(calls) if texts is None else texts
    if not len(calls) == len(tool_results) == len(texts):
        raise ValueError(f"{len(calls)} reference calls but {len(tool_results)} tool results and {len(texts)} texts")
    messages = list(row["prompt"])
    for call, result, text in zip(calls, tool_results, texts, strict=True):
        messages.append({"role": "assistant", "content": text, "tool_calls": [{"type": "function", "function": call}]})
        messages.append({"role": "tool", "name": call["name"], "content": result})
    messages.append({"role": "assistant", "content": FINAL_ANSWER})
    return messages


_TOOL_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.DOTALL)


def _value_span(text: str, start: int, end: int, key: str, value) -> tuple[int, int]:
    """The character span of `"key": value` 's value inside text[start:end] (a string's characters without quotes)."""
    written = json.dumps(value)
    found = re.compile(re.escape(json.dumps(key)) + r"\s*:\s*" + re.escape(written)).search(text, start, end)
    if found is None:
        raise ValueError(f"decision tokens: {key!r}: {written} is not written in the tool call {text[start:end]!r}")
    lo = found.end() - len(written)
    return (lo + 1, found.end() - 1) if isinstance(value, str) else (lo, found.end())


def _turn_openings(text: str, offsets: list, mask: list[int]) -> list[int]:
    """The character where each assistant turn's answer begins: its first character after any thinking block
    (`</think>`) and whitespace, the first of a call's working, of its `<tool_call>` or of the final answer."""
    turns, start = [], None
    for (a, b), m in zip([*offsets, (len(text), len(text))], [*mask, 0], strict=True):
        if m and start is None:
            start = a
        elif not m and start is not None:
            turns.append((start, a))
            start = None
    openings = []
    for lo, hi in turns:
        think = text.rfind("</think>", lo, hi)
        at = lo if think < 0 else think + len("</think>")
        while at < hi and text[at].isspace():
            at += 1
        if at < hi:
            openings.append(at)
    return openings


def decision_tokens(tokenizer, text: str, ids: list[int], mask: list[int], stops: bool = False) -> list[bool]:
    """Per token of `ids` (the tokenization of `text`): whether it is an assistant token that spells a tool call's
    name or one of its argument values, or with `stops` the first token of each assistant turn's answer (the choice
    between calling again and stopping, `_turn_openings`)."""
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    if encoded["input_ids"] != list(ids):
        raise ValueError("decision tokens: the rendered text does not tokenize to the template's token ids")
    offsets = encoded["offset_mapping"]
    assistant = [(a, b) for (a, b), m in zip(offsets, mask, strict=True) if m]
    spans = []
    for call in _TOOL_CALL.finditer(text):
        lo, hi = call.span(1)
        if not any(a <= lo < b for a, b in assistant):
            continue  # a tool-call example outside the assistant's turns (the system prompt's format line)
        parsed = json.loads(call.group(1))
        spans.append(_value_span(text, lo, hi, "name", parsed["name"]))
        spans.extend(_value_span(text, lo, hi, k, v) for k, v in (parsed.get("arguments") or {}).items())
    if stops:
        spans.extend((a, a + 1) for a in _turn_openings(text, offsets, mask))
    return [bool(m) and any(a < e and s < b for s, e in spans) for (a, b), m in zip(offsets, mask, strict=True)]


def with_observation(row: dict, observation: str) -> dict:
    """The row with reset's text appended to its prompt's last message, as TRL's environment loop does."""
    last = row["prompt"][-1]
    return {**row, "prompt": [*row["prompt"][:-1], {**last, "content": last["content"] + observation}]}


def encode_trace(
    tokenizer, row: dict, env_factory, chat_template: str | None, template_kwargs: dict, lazy: bool = False,
    decisions: bool = False,
):
    """(input_ids, labels) of one row's reference trace, or with `lazy` of the prompt answered without any tool
    call; labels are -100 outside assistant turns. With `decisions`, (input_ids, labels, decision_tokens)."""
    env = env_factory()
    observation = env.reset(**row)
    tools = environment_tools(env)
    if isinstance(observation, str):
        row = with_observation(row, observation)
    if lazy:
        messages = [*row["prompt"], {"role": "assistant", "content": FINAL_ANSWER}]
    else:
        results = [str(tools[c["name"]](**c["arguments"])) for c in json.loads(row["reference_calls_json"])]
        messages = reference_trace(row, results)
    return encode_messages(tokenizer, messages, list(tools.values()), chat_template, template_kwargs, decisions)


def encode_messages(tokenizer, messages: list[dict], tools: list, chat_template: str | None, template_kwargs: dict,
                    decisions: bool = False, stops: bool = False):
    """(input_ids, labels[, decision_tokens]) of a rendered conversation, labels on the assistant tokens only
    (`stops`: the decision tokens include each assistant turn's first token after its thinking)."""
    out = tokenizer.apply_chat_template(
        messages,
        tools=tools,
        chat_template=chat_template,
        tokenize=True,
        return_dict=True,
        return_assistant_tokens_mask=True,
        **template_kwargs,
    )
    ids, mask = out["input_ids"], out["assistant_masks"]
    if not any(mask):
        raise ValueError("the chat template marks no assistant tokens ({% generation %}); cannot warm start on traces")
    labels = [t if m else -100 for t, m in zip(ids, mask, strict=True)]
    if not decisions:
        return ids, labels
    text = tokenizer.apply_chat_template(messages, tools=tools, chat_template=chat_template, tokenize=False,
                                         **template_kwargs)
    return ids, labels, decision_tokens(tokenizer, text, ids, mask, stops)


def trace_warm_start(
    model_path: str,
    rows: list[dict],
    env_factory,
    steps: int,
    lr: float = 3e-3,
    batch_size: int = 8,
    seed: int = 0,
    template_kwargs: dict | None = None,
    tool_call_rate: float = 1.0,
    show_progress: bool = True,
) -> str:
    """Return the directory of `model_path` fine-tuned for `steps` steps on the rows' tool-call traces; cached.

    `tool_call_rate` is the share of traces that call tools, rounded to the nearest fraction a/b with b <= 8 (and
    at least 1/8): each row then appears as a acting and b - a lazy traces."""
    if not 0.0 < tool_call_rate <= 1.0:
        raise ValueError(f"warm_start_tool_call_rate={tool_call_rate} must be in (0, 1]")
    template_kwargs = template_kwargs or {}
    ratio = max(Fraction(tool_call_rate).limit_denominator(8), Fraction(1, 8))
    acting, lazy = ratio.numerator, ratio.denominator - ratio.numerator

    def encode(tokenizer) -> list[tuple[list[int], list[int]]]:
        chat_template = sampling_chat_template(tokenizer)
        return [
            encode_trace(tokenizer, r, env_factory, chat_template, template_kwargs, lazy=is_lazy)
            for r in rows
            for is_lazy in [False] * acting + [True] * lazy
        ]

    settings = FineTuneSettings(steps=steps, lr=lr, batch_size=batch_size, seed=seed)
    return fine_tune_cached(model_path, "warm_start_tools", encode, settings, show_progress=show_progress)
