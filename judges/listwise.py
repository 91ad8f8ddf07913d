"""Pure pieces of the listwise LLM judge: the prompt it sees, the orders it sees it in, and the strict parser.

Injection safety rests on three things: each candidate is wrapped in delimiters carrying a nonce derived from the
whole group (a completion cannot know it in advance), delimiter look-alikes inside a candidate are defused, and the
parser reads only the judge's own output and requires that nonce back.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import random
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

from judges.protocol import JudgeConfigError, JudgeError

PROMPTS_DIR = Path(__file__).resolve().parents[1] / "prompts" / "judges"
_THINK = re.compile(r"\A\s*<think>.*?</think>", re.DOTALL)
_FENCE = re.compile(r"```(?:json)?\s*(.*?)\s*```", re.DOTALL)


class JudgeParseError(JudgeError):
    """The judge's output is not the strict JSON answer asked for."""


@lru_cache(maxsize=None)
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(PROMPTS_DIR)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=False,
        autoescape=False,
    )


def load_template(name: str) -> jinja2.Template:
    """`prompts/judges/<name>.jinja`, or a `JudgeConfigError` listing the templates there."""
    try:
        return _environment().get_template(f"{name}.jinja")
    except jinja2.TemplateNotFound:
        known = sorted(p.stem for p in PROMPTS_DIR.glob("*.jinja"))
        raise JudgeConfigError(f"no judge template {name!r} in {PROMPTS_DIR} (known: {known})") from None


def prompt_text(prompt: Any) -> str:
    """The task as text: plain text as is, chat messages as `role: content` lines."""
    if isinstance(prompt, str):
        return prompt
    return "\n".join(f"{m['role']}: {m.get('content') or ''}" for m in prompt)


def defuse(text: str) -> str:
    """Break any delimiter look-alike (`<<<`, `>>>`) inside untrusted candidate text."""
    return text.replace("<<<", "< < <").replace(">>>", "> > >")


def split_common_prefix(texts: list[str], min_chars: int = 24) -> tuple[str, list[str]]:
    """(shared prefix, rests): the prefix all texts share, cut back to a whitespace boundary, shown once.

    Nothing is shared when there is a single text or the shared prefix is shorter than `min_chars`.
    """
    if len(texts) < 2:
        return "", list(texts)
    prefix = texts[0]
    for text in texts[1:]:
        prefix = prefix[: next((i for i, (a, b) in enumerate(zip(prefix, text)) if a != b), min(len(prefix), len(text)))]
    if not all(len(t) == len(prefix) or t[len(prefix)].isspace() for t in texts):
        cut = max(prefix.rfind(" "), prefix.rfind("\n"))
        prefix = prefix[: cut + 1] if cut >= 0 else ""
    if len(prefix.strip()) < min_chars:
        return "", list(texts)
    return prefix, [t[len(prefix) :] for t in texts]


def group_nonce(texts: list[str], shuffle_index: int, seed: int) -> str:
    """A nonce that depends on every candidate of the group, so no single candidate can predict it."""
    digest = hashlib.sha256(json.dumps([seed, shuffle_index, sorted(texts)]).encode()).hexdigest()
    return digest[:12]


def shuffle_orders(n: int, k: int, seed: int = 0) -> list[list[int]]:
    """K presentation orders of n candidates: as given, reversed, then seeded shuffles. Depends only on (n, k, seed)."""
    orders = [list(range(n))]
    if k > 1:
        orders.append(list(reversed(range(n))))
    for i in range(2, k):
        order = list(range(n))
        random.Random(f"{seed}:{n}:{i}").shuffle(order)
        orders.append(order)
    return orders[:k]


def render_judge_prompt(
    template: str,
    rubric: str,
    task: Any,
    candidates: list[str],
    nonce: str,
    columns: dict[str, Any] | None = None,
    reference: Any = None,
    prefix_min_chars: int = 24,
) -> str:
    """The judge's user message: rubric, task, optional reference, shared prefix once, delimited candidates."""
    columns = columns or {}
    prefix, rests = split_common_prefix(candidates, prefix_min_chars)
    return load_template(template).render(
        n=len(candidates),
        rubric=load_template(rubric).render(**columns).strip(),
        task=prompt_text(task),
        reference=reference,
        nonce=nonce,
        prefix=defuse(prefix),
        candidates=[{"id": i + 1, "text": defuse(text)} for i, text in enumerate(rests)],
    )


def parse_judge_output(raw: str, n: int, nonce: str) -> list[float]:
    """The n scores from the judge's own output, or `JudgeParseError` carrying the raw output.

    Accepted: one JSON object `{"nonce": <nonce>, "scores": [n numbers in [0, 1]]}`, optionally after a leading
    `<think>...</think>` block and optionally inside one ```json fence. Nothing else: no extra keys, no prose.
    """
    text = _THINK.sub("", raw, count=1).strip()
    fenced = _FENCE.fullmatch(text)
    if fenced:
        text = fenced.group(1)
    try:
        answer = json.loads(text)
    except json.JSONDecodeError as err:
        raise JudgeParseError(f"judge output is not JSON ({err.msg})", raw) from None
    if not isinstance(answer, dict) or set(answer) != {"nonce", "scores"}:
        keys = sorted(answer) if isinstance(answer, dict) else type(answer).__name__
        raise JudgeParseError(f"judge output must be an object with keys nonce and scores, got {keys}", raw)
    if answer["nonce"] != nonce:
        raise JudgeParseError(f"judge output carries nonce {answer['nonce']!r}, expected {nonce!r}", raw)
    scores = answer["scores"]
    if not isinstance(scores, list) or len(scores) != n:
        raise JudgeParseError(f"judge output must hold {n} scores, got {scores!r}", raw)
    for i, value in enumerate(scores):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0.0 <= value <= 1.0):
            raise JudgeParseError(f"judge score {i + 1} is {value!r}, not a number in [0, 1]", raw)
    return [float(v) for v in scores]


def position_consistency(score_rows: list[list[float]]) -> float | None:
    """How much the judge's ranking survives reordering: over every pair of shuffles and every pair of candidates,
    the fraction whose order (better / tie / worse) is the same. 1.0 = the same ranking in every order. None when
    there are fewer than two shuffles or two candidates."""
    if len(score_rows) < 2 or len(score_rows[0]) < 2:
        return None
    agree = total = 0
    n = len(score_rows[0])
    for a, b in itertools.combinations(score_rows, 2):
        for i, j in itertools.combinations(range(n), 2):
            sign_a = (a[i] > a[j]) - (a[i] < a[j])
            sign_b = (b[i] > b[j]) - (b[i] < b[j])
            agree += sign_a == sign_b
            total += 1
    return agree / total


def mean_by_text(texts: list[str], scores: list[float]) -> list[float]:
    """Identical completions get the mean of their scores, so the result does not depend on which copy sat where."""
    sums: dict[str, list[float]] = {}
    for text, score in zip(texts, scores, strict=True):
        sums.setdefault(text, []).append(score)
    return [math.fsum(sums[t]) / len(sums[t]) for t in texts]
