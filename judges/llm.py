"""`LLMGroupJudge`: a causal LM grades all completions of one prompt at once (listwise), in K shuffled orders.

For each of the K orders the judge sees the rubric (`prompts/judges/<rubric>.jinja`), the task, and every candidate
delimited with a group nonce; it answers strict JSON, parsed from its own output only. Scores are mapped back to the
candidates and averaged over the orders (position bias), identical completions get identical scores, and the
agreement of the rankings across orders is reported as `judge/position_consistency`. The candidates are put in a
canonical (sorted) order before shuffling, so the result does not depend on the order the batch delivered them in.
"""

from __future__ import annotations

from typing import Any

from judges.listwise import (
    group_nonce,
    mean_by_text,
    parse_judge_output,
    position_consistency,
    render_judge_prompt,
    shuffle_orders,
)
from judges.llm_backends import ChatBackend
from judges.protocol import Group, GroupScores, JudgeConfigError


class LLMGroupJudge:
    """Listwise LLM judge.

    Args:
        backend: where answers come from (`TransformersChatBackend`, `OpenAIChatBackend`, or any `complete()`).
        num_shuffles: K, the number of presentation orders scored and averaged (1 disables the bias control).
        template: the frame template in `prompts/judges/` (`listwise`).
        rubric: the rubric template in `prompts/judges/` (rendered with the row's columns, e.g. `answer`).
        reference_column: a column shown to the judge as the reference answer (None: none shown).
        seed: seeds the shuffles and the nonces.
        prefix_min_chars: a prefix shared by all candidates at least this long is shown once.
    """

    def __init__(
        self,
        backend: ChatBackend,
        num_shuffles: int = 2,
        template: str = "listwise",
        rubric: str = "correctness",
        reference_column: str | None = None,
        seed: int = 0,
        prefix_min_chars: int = 24,
    ):
        if num_shuffles < 1:
            raise JudgeConfigError(f"LLMGroupJudge: num_shuffles must be >= 1, got {num_shuffles}")
        self.backend = backend
        self.num_shuffles = num_shuffles
        self.calls_per_group = num_shuffles
        self.template = template
        self.rubric = rubric
        self.reference_column = reference_column
        self.seed = seed
        self.prefix_min_chars = prefix_min_chars

    def _reference(self, group: Group) -> Any:
        if self.reference_column is None:
            return None
        if self.reference_column not in group.columns:
            raise JudgeConfigError(
                f"LLMGroupJudge: reference_column {self.reference_column!r} is not a dataset column "
                f"(columns: {sorted(group.columns)})"
            )
        return group.columns[self.reference_column]

    def render(self, group: Group, canonical: list[str], order: list[int], shuffle_index: int) -> tuple[str, str]:
        """(user message, nonce) for presenting `canonical` candidates in `order`."""
        nonce = group_nonce(canonical, shuffle_index, self.seed)
        message = render_judge_prompt(
            self.template,
            self.rubric,
            group.prompt,
            [canonical[i] for i in order],
            nonce,
            columns=group.columns,
            reference=self._reference(group),
            prefix_min_chars=self.prefix_min_chars,
        )
        return message, nonce

    def score_group(self, group: Group) -> GroupScores:
        texts = group.completions
        n = len(texts)
        canonical_index = sorted(range(n), key=lambda i: (texts[i], i))
        canonical = [texts[i] for i in canonical_index]
        rows: list[list[float]] = []  # per shuffle, scores in canonical order
        raw = None
        for k, order in enumerate(shuffle_orders(n, self.num_shuffles, self.seed)):
            message, nonce = self.render(group, canonical, order, k)
            raw = self.backend.complete([{"role": "user", "content": message}])
            presented = parse_judge_output(raw, n, nonce)
            row = [0.0] * n
            for slot, candidate in enumerate(order):
                row[candidate] = presented[slot]
            rows.append(row)
        averaged = [sum(r[c] for r in rows) / len(rows) for c in range(n)]
        canonical_scores = mean_by_text(canonical, averaged)
        scores = [0.0] * n
        for c, original in enumerate(canonical_index):
            scores[original] = canonical_scores[c]
        consistency = position_consistency(rows)
        metrics = {"position_consistency": consistency} if consistency is not None else {}
        return GroupScores(scores, calls=len(rows), metrics=metrics, raw_output=raw)
