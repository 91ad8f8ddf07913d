"""The KV cache of a multi-turn episode, kept from one turn's `generate` to the next.

A tool loop calls `generate` once a turn with each rollout's whole context so far (prompt, earlier turns, tool
replies). Without a cache every call runs its forward over all of it again, the earlier turns' tokens included.
`TurnCache` wraps `model.generate` for the length of one tool loop and feeds each call only the tokens its rows have
not been through yet; on the first call, the rows that share a prompt (a GRPO group's rollouts) run it once.

How a row finds its cache: every cached position keeps its token id and a validity bit. A new row takes the cached
row with which it shares the longest prefix of valid tokens; the first `c` valid positions (that prefix) stay valid,
every later one is masked out (the pads generated after a row's end, a forced turn's sampled tokens, a turn cut after
its call). A valid position's keys and values depend only on the tokens before it and their positions, which are the
same in the new row, so the logits equal a full re-prefill's up to float rounding (tested to 1e-5). Before each call
the cache is compacted (each row's kept positions moved to the right end, the rest dropped) and every row feeds a
tail of the same length (a short tail runs some of its cached prefix again), so the sequence is as long as its
longest row, left-padded; transformers derives positions from the attention mask's cumulative sum.

The cache lives for one tool loop (`active`); the weights do not change inside it. Only a cache of plain attention
layers (transformers' `DynamicCache` of `DynamicLayer`s: keys and values by position) can be narrowed this way; a
sliding window drops positions and a recurrent state (Mamba, linear attention) cannot unsee a masked token, so such
a model, or one whose `generate` returns no cache (gradient checkpointing turns it off), re-prefills every turn as
before: `reused_tokens` stays 0 (logged as `turns/cache_reused`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial

import torch
from transformers import GenerationMixin
from transformers.cache_utils import DynamicCache, DynamicLayer

from training.algorithms.generate_wrap import wrapped_generate


class TurnCache:
    """See the module docstring. `reused_tokens`/`fed_tokens`: prompt tokens the calls did not / did run through
    the model, summed over the loop's calls."""

    def __init__(self, pad_token_id: int):
        self.pad = pad_token_id
        self.cache = None
        self.tokens: torch.Tensor | None = None  # (rows, positions): the token id at each cached position
        self.valid: torch.Tensor | None = None  # (rows, positions) bool
        self._model = None
        self.reused_tokens = 0
        self.fed_tokens = 0

    @contextmanager
    def active(self, model) -> Iterator[TurnCache]:
        """Wrap `model.generate` for one tool loop."""

        if not _transformers_generate(model):  # a scripted stand-in (tests) generates as it likes
            yield self
            return

        def wrap(original):
            return partial(self._generate, original)

        self._model = model
        try:
            with wrapped_generate(model, wrap):
                yield self
        finally:
            self.cache = self.tokens = self.valid = self._model = None

    def _generate(self, original, input_ids=None, attention_mask=None, **kwargs):
        if input_ids is None or attention_mask is None or "past_key_values" in kwargs:
            return original(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
        rows = [ids[mask.bool()].tolist() for ids, mask in zip(input_ids.cpu(), attention_mask.cpu(), strict=True)]
        wants_dict = kwargs.pop("return_dict_in_generate", False)
        if self.cache is None:
            self._run_shared_prompts(rows, input_ids.device)
        fed_ids, fed_mask, cached_len = self._inputs(rows, input_ids.device)
        out = original(input_ids=fed_ids, attention_mask=fed_mask, return_dict_in_generate=True,
                       past_key_values=self.cache, **kwargs)
        generated = out.sequences[:, fed_ids.size(1):]
        self._keep(out, fed_ids, fed_mask, generated)
        self.fed_tokens += int(fed_mask[:, cached_len:].sum())
        self.reused_tokens += int(fed_mask[:, :cached_len].sum())
        out.sequences = torch.cat([input_ids, generated], dim=1)  # as the caller padded it
        return out if wants_dict else out.sequences

    def _run_shared_prompts(self, rows: list[list[int]], device) -> None:
        """The loop's first call: a GRPO group's rollouts share their prompt, so each distinct prompt (but its last
        token, which generate needs to feed) runs once, and its cache is copied to the rollouts."""
        distinct = list(dict.fromkeys(map(tuple, rows)))
        if len(distinct) == len(rows):
            return
        width = max(map(len, distinct)) - 1
        ids = torch.full((len(distinct), width), self.pad, dtype=torch.long)
        mask = torch.zeros((len(distinct), width), dtype=torch.long)
        for j, row in enumerate(distinct):
            ids[j, width - len(row) + 1:] = torch.tensor(row[:-1], dtype=torch.long)
            mask[j, width - len(row) + 1:] = 1
        positions = (mask.cumsum(dim=1) - 1).clamp(min=0)  # as generate numbers left-padded rows
        with torch.no_grad():
            out = self._model(input_ids=ids.to(device), attention_mask=mask.to(device),
                              position_ids=positions.to(device), use_cache=True, logits_to_keep=1)
        cache = getattr(out, "past_key_values", None)
        if not _positional(cache):
            return
        source = [distinct.index(tuple(row)) for row in rows]
        cache.batch_select_indices(torch.tensor(source, device=device))
        self.cache, self.tokens, self.valid = cache, ids[source], mask[source].bool()
        ran = int(mask.sum())  # the call below counts every row's prompt as served from the cache; these ran
        self.fed_tokens += ran
        self.reused_tokens -= ran

    def _inputs(self, rows: list[list[int]], device) -> tuple[torch.Tensor, torch.Tensor, int]:
        """The ids and attention mask to feed, cache positions first; the cache narrowed to the new rows."""
        if self.cache is None:
            kept = [0] * len(rows)
            cached_tokens = torch.zeros((len(rows), 0), dtype=torch.long)
            cached_valid = torch.zeros((len(rows), 0), dtype=torch.bool)
        else:
            source, kept = self._match(rows)
            # every row feeds the same number of new tokens (a short tail gives back some of its cached prefix, run
            # again): the sequence is then as long as the longest row, never the longest prefix plus the longest tail
            tail = max(len(row) - k for row, k in zip(rows, kept, strict=True))
            kept = [max(0, min(k, len(row) - tail)) for row, k in zip(rows, kept, strict=True)]
            self.cache.batch_select_indices(torch.tensor(source, device=device))
            cached_tokens, cached_valid = self.tokens[source], self.valid[source]
            rank = cached_valid.long().cumsum(dim=1)
            cached_valid = cached_valid & (rank <= torch.tensor(kept).unsqueeze(1))
            cached_tokens, cached_valid = self._compact(cached_tokens, cached_valid, device)
        width = max(len(row) - k for row, k in zip(rows, kept, strict=True))
        new_ids = torch.full((len(rows), width), self.pad, dtype=torch.long)
        new_mask = torch.zeros((len(rows), width), dtype=torch.bool)
        for j, (row, k) in enumerate(zip(rows, kept, strict=True)):
            tail = row[k:]
            new_ids[j, width - len(tail):] = torch.tensor(tail, dtype=torch.long)
            new_mask[j, width - len(tail):] = True
        ids = torch.cat([cached_tokens.where(cached_valid, self.pad), new_ids], dim=1)
        mask = torch.cat([cached_valid, new_mask], dim=1)
        return ids.to(device), mask.long().to(device), cached_tokens.size(1)

    def _compact(self, tokens: torch.Tensor, valid: torch.Tensor, device) -> tuple[torch.Tensor, torch.Tensor]:
        """Move each row's valid positions to the right end, in order, and drop the rest: without it the masked
        positions of earlier turns (left pads, pads after a row's end, cut tokens) pile up turn after turn, and the
        sequence outgrows the model's context though its real length does not."""
        counts = valid.sum(dim=1)
        width = int(counts.max())
        index = torch.zeros((len(valid), width), dtype=torch.long)
        kept = torch.zeros((len(valid), width), dtype=torch.bool)
        for j, count in enumerate(counts.tolist()):
            index[j, width - count:] = valid[j].nonzero().squeeze(1)
            kept[j, width - count:] = True
        gather = index.to(device)
        for layer in self.cache.layers:
            at = gather[:, None, :, None].expand(-1, layer.keys.size(1), -1, layer.keys.size(3))
            layer.keys, layer.values = layer.keys.gather(2, at), layer.values.gather(2, at)
        return tokens.gather(1, index), kept

    def _match(self, rows: list[list[int]]) -> tuple[list[int], list[int]]:
        """Per new row: the cached row sharing its longest valid-token prefix, and that prefix's length (at most the
        row's length less one: generate needs one token to feed)."""
        cached = [t[v].tolist() for t, v in zip(self.tokens, self.valid, strict=True)]
        width = max(max(map(len, cached)), max(map(len, rows)))
        old = torch.full((len(cached), width), -1, dtype=torch.long)
        new = torch.full((len(rows), width), -2, dtype=torch.long)
        for j, row in enumerate(cached):
            old[j, : len(row)] = torch.tensor(row, dtype=torch.long)
        for j, row in enumerate(rows):
            new[j, : len(row)] = torch.tensor(row, dtype=torch.long)
        same = (new.unsqueeze(1) == old.unsqueeze(0)).long().cumprod(dim=2).sum(dim=2)  # (new, old) common prefix
        best, source = same.max(dim=1)
        kept = [min(int(b), len(row) - 1) for b, row in zip(best, rows, strict=True)]
        return source.tolist(), kept

    def _keep(self, out, fed_ids: torch.Tensor, fed_mask: torch.Tensor, generated: torch.Tensor) -> None:
        """The cache after this call covers the fed positions and every generated token but the last."""
        cache = getattr(out, "past_key_values", None)
        if not _positional(cache):
            self.cache = self.tokens = self.valid = None
            return
        processed = generated[:, :-1].cpu()
        self.cache = cache
        self.tokens = torch.cat([fed_ids.cpu(), processed], dim=1)
        self.valid = torch.cat([fed_mask.cpu().bool(), torch.ones_like(processed, dtype=torch.bool)], dim=1)
        if cache.get_seq_length() != self.tokens.size(1):
            raise RuntimeError(f"the turn cache holds {cache.get_seq_length()} positions, expected "
                               f"{self.tokens.size(1)} (fed {fed_ids.size(1)} + generated {generated.size(1)} - 1)")


def _transformers_generate(model) -> bool:
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # under PEFT
    return isinstance(base, GenerationMixin)


def _positional(cache) -> bool:
    return type(cache) is DynamicCache and all(type(layer) is DynamicLayer for layer in cache.layers)
