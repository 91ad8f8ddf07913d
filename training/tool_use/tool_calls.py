"""Malformed tool calls become tool error messages to the model, and are counted; they never crash a run.

TRL's tool loop already turns an exception raised by a tool, or a call to a name it has no tool for, into a
`{"error": ...}` tool message. What it does not do: a `<tool_call>` block that is not valid JSON is silently taken for
a final plain-text answer (no error reaches the model), a call with a wrong argument type runs anyway, and no kind
of malformed call is counted. This module adds exactly that, on top of TRL's loop:

* `strict_parse_response` wraps the tokenizer's `parse_response`: bad JSON, an unknown tool name, or arguments that
  are not an object turn into a call to the reserved `invalid_tool_call` tool, carrying the kind and the reason.
* `EpisodeTools` is what TRL calls for one rollout: every tool checked against its JSON schema (the one the model
  saw in its prompt), a per-episode call budget, and `invalid_tool_call`; each refusal is counted under its kind
  and raised as `ToolCallError`, which TRL returns to the model as the tool's error message.
"""

from __future__ import annotations

import difflib
import inspect
import json
from collections import Counter
from collections.abc import Callable, Hashable

from transformers.utils import get_json_schema

from training.tool_use.choices import TurnChoice, chosen

INVALID_TOOL_CALL = "invalid_tool_call"
MALFORMED_KINDS = ("bad_json", "unknown_tool", "bad_arguments", "too_many_turns")
TOOL_CALL_FORMAT = '<tool_call>\n{"name": <tool name>, "arguments": {<argument>: <value>, ...}}\n</tool_call>'

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


class ToolCallError(ValueError):
    """A malformed tool call; the message is what the model reads back as the tool's error."""


def malformed_metric(kind: str) -> str:
    """The metric name a malformed-call kind is counted under."""
    return f"tools/malformed/{kind}"


def tool_name(tool) -> str:
    return tool["function"]["name"] if isinstance(tool, dict) else tool.__name__


def schema_argument_errors(schema: dict, arguments: dict) -> list[str]:
    """What is wrong with `arguments` for a tool's JSON schema: missing, unexpected, mistyped or off-enum values."""
    params = schema["function"]["parameters"]
    properties = params.get("properties", {})
    errors = [f"missing argument {name!r}" for name in params.get("required", []) if name not in arguments]
    for name, value in arguments.items():
        if name not in properties:
            errors.append(f"unexpected argument {name!r} (expected: {', '.join(properties) or 'none'})")
            continue
        spec = properties[name]
        expected = _JSON_TYPES.get(spec.get("type"))
        # bool is an int in Python, but not an integer or a number in JSON
        if expected and (not isinstance(value, expected) or (isinstance(value, bool) and bool not in expected)):
            errors.append(f"argument {name!r} must be a {spec['type']}, got {type(value).__name__} {value!r}")
        elif "enum" in spec and value not in spec["enum"]:
            errors.append(f"argument {name!r} must be one of {spec['enum']}, got {value!r}")
    return errors


def _invalid_call(kind: str, reason: str) -> dict:
    return {"type": "function", "function": {"name": INVALID_TOOL_CALL, "arguments": {"kind": kind, "reason": reason}}}


def check_tool_calls(parsed: dict | None, text: str, known: list[str] | None) -> dict | None:
    """The parsed assistant message with every malformed call replaced by an `invalid_tool_call`; None when the
    message holds no tool call and no `<tool_call>` markup (a plain answer)."""
    calls = (parsed or {}).get("tool_calls") or []
    if not calls:
        if "<tool_call>" not in text:
            return None
        reason = f"the <tool_call> block is not valid JSON; write it as {TOOL_CALL_FORMAT}"
        return {"role": "assistant", "content": text, "tool_calls": [_invalid_call("bad_json", reason)]}
    checked = []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str):
            checked.append(_invalid_call("bad_json", f"a tool call needs a string 'name'; write {TOOL_CALL_FORMAT}"))
        elif known is not None and name not in known:
            nearest = difflib.get_close_matches(name, known, n=1, cutoff=0.0)
            hint = f"; did you mean {nearest[0]!r}?" if nearest else ""
            checked.append(_invalid_call("unknown_tool", f"unknown tool {name!r}; tools: {', '.join(known)}{hint}"))
        elif not isinstance(function.get("arguments"), dict):
            got = function.get("arguments")
            checked.append(_invalid_call("bad_arguments", f"arguments of {name!r} must be a JSON object, got {got!r}"))
        else:
            checked.append(call)
    return {**parsed, "tool_calls": checked}


def strict_parse_response(original: Callable, tokenizer) -> Callable:
    """A drop-in for `tokenizer.parse_response` that reports malformed tool calls instead of hiding them."""

    def parse_response(ids, prefix=None, tools=None, **kwargs):
        text = tokenizer.decode(ids, skip_special_tokens=True)
        try:
            given = {k: v for k, v in (("prefix", prefix), ("tools", tools)) if v is not None}
            parsed = original(ids, **given, **kwargs)
        except (ValueError, TypeError):  # what the parser raises on malformed markup (TRL catches the same two)
            parsed = None
        known = sorted(tool_name(t) for t in tools) if tools is not None else None
        checked = check_tool_calls(parsed, text, known)
        if checked is not None:
            return checked
        if parsed is None:  # no tool-call markup and the parser still failed: a plain answer, as TRL would decode it
            return {"role": "assistant", "content": text}
        return parsed

    parse_response.strict_tool_calls = True
    return parse_response


def install_strict_parsing(tokenizer) -> None:
    """Make `tokenizer.parse_response` (which TRL's `parse_response` calls) report malformed calls; idempotent."""
    if not getattr(tokenizer.parse_response, "strict_tool_calls", False):
        tokenizer.parse_response = strict_parse_response(tokenizer.parse_response, tokenizer)


class EpisodeTools:
    """The tools of one rollout as TRL's tool loop calls them: schema-checked, budgeted, counted.

    Args:
        tools: `{name: callable}`, e.g. the bound methods of the rollout's environment.
        counts: where refusals are counted, by kind (shared across a batch).
        max_calls: tool calls allowed per episode; later calls are refused as `too_many_turns`.
        clock: when given, the model turn of the call now running; the turn of every call passed on to a tool is
            kept in `forwarded_turns`, of every refused one in `refused_turns` (training/features/call_credit.py).
        state: with `clock`, what reads the environment's state key (training/tool_use/state_keys.py): each turn's
            first call notes, in `turn_states`, the calls attempted before it and the key, and in `turn_histories`
            those calls themselves (training/features/step_credit.py).
        choices: with `clock`, what reads the environment's choices (training/tool_use/choices.py): a turn whose first
            call is one of them notes, in `turn_choices`, which one and what each would earn
            (training/features/choice_credit.py).
    """

    def __init__(self, tools: dict[str, Callable], counts: Counter, max_calls: int,
                 clock: Callable[[], int] | None = None, state: Callable[[], Hashable] | None = None,
                 choices: Callable[[], list] | None = None):
        self.tools = tools
        self.schemas = {name: get_json_schema(fn) for name, fn in tools.items()}
        self.counts = counts
        self.max_calls = max_calls
        self.calls = 0
        self.clock = clock
        self.state = state
        self.forwarded_turns: list[int] = []
        self.refused_turns: list[int] = []
        self.choices = choices
        self.turn_choices: dict[int, TurnChoice] = {}
        self.turn_states: dict[int, tuple[int, Hashable]] = {}
        self.turn_histories: dict[int, tuple[str, ...]] = {}
        self.history: list[str] = []  # every call attempted, as JSON text, in order

    def _refuse(self, kind: str, reason: str):
        self.counts[kind] += 1
        if self.clock is not None:
            self.refused_turns.append(self.clock())
        raise ToolCallError(f"{kind}: {reason}")

    def _note(self, name: str, arguments: dict) -> None:
        """Before a call runs: on the turn's first call, the state it was made in and the choice it made (when they
        are read), then the call joins the history."""
        turn = self.clock() if self.clock is not None else None
        if turn is not None and turn not in self.turn_histories:
            self.turn_histories[turn] = tuple(self.history)
            if self.state is not None:
                self.turn_states[turn] = (self.calls, self.state())
            made = chosen(self.choices(), name, arguments) if self.choices is not None else None
            if made is not None:
                self.turn_choices[turn] = made
        self.history.append(json.dumps({"name": name, "arguments": arguments}, sort_keys=True, default=repr))

    def _budget(self) -> None:
        self.calls += 1
        if self.calls > self.max_calls:
            self._refuse("too_many_turns", f"at most {self.max_calls} tool calls per episode; reply without tools")

    def _checked(self, name: str) -> Callable:
        fn = self.tools[name]

        def call(**arguments):
            self._note(name, arguments)
            self._budget()
            errors = schema_argument_errors(self.schemas[name], arguments)
            if errors:
                self._refuse("bad_arguments", f"{name}: " + "; ".join(errors))
            if self.clock is not None:
                self.forwarded_turns.append(self.clock())
            return fn(**arguments)

        call.__name__ = name
        call.__signature__ = inspect.signature(fn)
        return call

    def invalid_tool_call(self, kind: str, reason: str):
        """What the model gets back for a call `strict_parse_response` could not accept."""
        self._note(INVALID_TOOL_CALL, {"kind": kind, "reason": reason})
        self._budget()
        self._refuse(kind, reason)

    def as_tool_dict(self) -> dict[str, Callable]:
        """`{name: callable}` in the shape of TRL's per-rollout sync tool dict, plus `invalid_tool_call`."""
        return {**{name: self._checked(name) for name in self.tools}, INVALID_TOOL_CALL: self.invalid_tool_call}
