"""The KV cache kept across a tool loop's turns (training/tool_use/turn_cache.py): each turn runs only its new tokens,
and its logits are a full re-prefill's to float rounding, whatever happened between the turns (rows that left the
batch, turns cut after some of their tokens, forced tokens that were never sampled, tool replies of any length)."""

from __future__ import annotations

from contextlib import nullcontext

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from tests.support.decoder_families import build_family_model
from training.tool_use.turn_cache import TurnCache

PAD = 0


def _padded(rows):
    width = max(map(len, rows))
    ids = torch.full((len(rows), width), PAD)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for j, row in enumerate(rows):
        ids[j, width - len(row):] = torch.tensor(row)
        mask[j, width - len(row):] = 1
    return ids, mask


def _turn(model, rows):
    """One greedy turn of `rows`, as a tool loop calls generate: its new tokens and per-step logits."""
    ids, mask = _padded(rows)
    out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=6, do_sample=False, output_logits=True,
                         return_dict_in_generate=True, pad_token_id=PAD, eos_token_id=[2])
    return out.sequences[:, ids.size(1):].tolist(), torch.stack(out.logits, dim=1)


def _episodes(model, turns: int, cached: bool, seed: int = 0):
    """`turns` turns of 4 rows (two share a prompt, as a group's rollouts do); between turns each row keeps only some
    of its new tokens (a cut turn), gets a reply of its own length, and after turn 1 row 2 leaves the batch."""
    gen = torch.Generator().manual_seed(seed)
    vocab = model.config.vocab_size
    rows = [torch.randint(3, vocab, (n,), generator=gen).tolist() for n in (60, 75, 68)]
    rows = [rows[0], rows[1], rows[0], rows[2]]
    cache = TurnCache(PAD)
    logits, cache.widths = [], []
    with cache.active(model) if cached else nullcontext():
        for turn in range(turns):
            new, turn_logits = _turn(model, rows)
            logits.append(turn_logits)
            if cached and cache.tokens is not None:  # positions held against the longest row's real length
                cache.widths.append((cache.tokens.size(1), max(map(len, rows)) + len(new[0]) - 1))
            keep = [0, 1, 3] if turn == 1 else list(range(len(rows)))
            replies = [torch.randint(3, vocab, (3 + 2 * j,), generator=gen).tolist() for j in range(len(rows))]
            rows = [rows[j] + new[j][: 2 + j] + replies[j] for j in keep]
    return logits, cache


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))  # spread the logits, so that greedy tokens differ between rows
    return model


def test_each_turn_runs_only_its_new_tokens_and_its_logits_are_a_full_prefills(tiny):
    plain, _ = _episodes(tiny, 4, cached=False)
    cached, cache = _episodes(tiny, 4, cached=True)
    assert [t.shape for t in cached] == [t.shape for t in plain]
    for turn, (a, b) in enumerate(zip(cached, plain, strict=True)):
        assert torch.allclose(a, b, atol=1e-5, rtol=0), (turn, (a - b).abs().max())
    assert cache.reused_tokens > 2 * cache.fed_tokens  # most of every later turn's context came from the cache
    # the masked positions of earlier turns are dropped and every row feeds its tail at the same place: the
    # sequence is as long as the longest row, whatever the turns before left behind
    assert len(cache.widths) == 4 and all(width == longest for width, longest in cache.widths)
    assert "generate" not in vars(tiny)  # the wrapper is gone after the loop


def test_the_counts_the_metric_reads(tiny):
    """A loop's first call runs every token of distinct prompts; a prompt repeated (a group's rollouts) runs once."""
    cache = TurnCache(PAD)
    with cache.active(tiny):
        _turn(tiny, [[5, 6, 7, 8], [9, 10, 11]])
    assert cache.reused_tokens == 0 and cache.fed_tokens == 7
    cache = TurnCache(PAD)
    with cache.active(tiny):
        _turn(tiny, [[5, 6, 7, 8], [5, 6, 7, 8], [9, 10, 11]])
    assert cache.reused_tokens == 3 and cache.fed_tokens == 8  # the second [5, 6, 7] came from the first's cache


@pytest.mark.parametrize("family", ["falcon_mamba", "gemma2"])
def test_a_model_whose_cache_cannot_unsee_a_token_reprefills(family, tiny_model_dir):
    """A recurrent state (Mamba) or a sliding window cannot have positions masked afterwards: such a model gets no
    reuse, and the same logits as without the wrapper."""
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = build_family_model(family, tokenizer).eval()
    plain, _ = _episodes(model, 3, cached=False)
    cached, cache = _episodes(model, 3, cached=True)
    assert cache.reused_tokens == 0
    for a, b in zip(cached, plain, strict=True):
        assert torch.allclose(a, b, atol=1e-5, rtol=0)
