"""The rule that ends a model turn (training/tool_use/turn_end.py): at its end-of-turn token, at its call's closing
token with the template's tail appended, or at the limit; and how a finished turn is classified."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from training.features.turn_limits import appended_masked
from training.tool_use.turn_end import (TurnEnd, TurnEndError, completion_turns, resolved_limit, turn_end)

EOS, PAD, OPEN, CLOSE = 2, 0, 3, 4
RULE = TurnEnd(limit=6, stop_ids=(EOS, PAD), call_open=OPEN, call_close=CLOSE, tail=(EOS,))


def test_a_turn_ends_at_its_stop_at_its_calls_closing_token_with_the_tail_or_at_the_limit():
    assert RULE.finish([7, 8, EOS, PAD, PAD]) == ([7, 8, EOS], 0)
    assert RULE.finish([OPEN, 9, CLOSE, PAD, PAD]) == ([OPEN, 9, CLOSE, EOS], 1)  # the tail appended, unsampled
    assert RULE.finish([OPEN, 9, CLOSE, 7, 7]) == ([OPEN, 9, CLOSE, EOS], 1)  # anything after the close is dropped
    assert RULE.finish([7] * 20) == ([7] * 6, 0)  # cut at the limit
    assert RULE.sampler_stops == [EOS, PAD, CLOSE]
    plain = TurnEnd(limit=6, stop_ids=(EOS,))
    assert plain.finish([OPEN, 9, CLOSE, 7, EOS]) == ([OPEN, 9, CLOSE, 7, EOS], 0)


def test_turns_are_classified_cut_void_or_well_formed():
    ids = [OPEN, 9, CLOSE, EOS, 50, 51, 7, 7, 7, 7, 7, 7, 52, OPEN, 9, EOS, 53, 7, 7]
    mask = [1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1]
    turns = completion_turns(ids, mask, RULE)
    assert [(t.tokens, t.cut, t.void, t.appended) for t in turns] == [
        (3, False, False, 1),  # a call, ended at its closing token, the EOS appended
        (6, True, True, 0),  # cut at the limit
        (3, False, True, 0),  # an opened call that never closed
        (2, False, True, 0),  # cut by the episode's budget, below the limit
    ]
    assert appended_masked(ids, mask, RULE) == [1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1]
    answer = completion_turns([7, 8, EOS], [1, 1, 1], RULE)
    assert [(t.cut, t.void) for t in answer] == [(False, False)]  # a plain answer is no void turn
    with pytest.raises(RuntimeError, match="did not stop at the closing token"):
        completion_turns([OPEN, CLOSE, 7], [1, 1, 1], RULE)


def test_the_rule_is_read_from_the_tokenizer_and_template(tiny_model_dir):
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    rule = turn_end(tok, None, {"enable_thinking": False}, 40, [tok.eos_token_id], True)
    assert rule.call_close == tok.convert_tokens_to_ids("</tool_call>")
    assert rule.tail == (tok.convert_tokens_to_ids("<|im_end|>"),)  # what Qwen3's template writes after the call
    assert turn_end(tok, None, {}, 40, [tok.eos_token_id], False).call_close is None


def test_a_tokenizer_whose_closing_tag_is_several_tokens_is_refused_naming_the_field(tiny_model_dir):
    class Split:
        def encode(self, text, add_special_tokens=False):
            return [1, 2]

    with pytest.raises(TurnEndError, match="end_turn_at_call"):
        turn_end(Split(), None, {}, 40, [2], True)


def test_the_default_limit_is_below_the_episodes_budget():
    assert resolved_limit(None, 720)[0] == 256
    assert resolved_limit(None, 72)[0] == 36
    assert resolved_limit(48, 720) == (48, "max_turn_tokens, the recipe's")
    assert resolved_limit(56, 24)[0] == 24  # a recipe's limit above a budget lowered for a quick evaluation
