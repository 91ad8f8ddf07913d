"""The offline tiny Qwen3: deterministic, loadable with the Auto classes, and speaking Qwen3's chat markup."""

import filecmp

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl.chat_template_utils import add_response_schema

import training.run_setup.tiny_qwen3 as tiny_qwen3
from training.run_setup.models import resolve_model_path
from training.run_setup.tiny_qwen3 import MARKUP_TOKENS, SPECIAL_TOKENS, write_tiny_qwen3


def test_same_seed_gives_byte_identical_files(tmp_path):
    a = write_tiny_qwen3(tmp_path / "a", seed=3)
    b = write_tiny_qwen3(tmp_path / "b", seed=3)
    c = write_tiny_qwen3(tmp_path / "c", seed=4)
    files = sorted(p.name for p in a.iterdir())
    assert "model.safetensors" in files and "tokenizer.json" in files
    match, mismatch, errors = filecmp.cmpfiles(a, b, files, shallow=False)
    assert mismatch == [] and errors == []
    assert not filecmp.cmp(a / "model.safetensors", c / "model.safetensors", shallow=False)


def test_cache_never_serves_a_model_built_by_another_build_recipe(tmp_path, monkeypatch):
    monkeypatch.setenv("STRICT_GRPO_CACHE", str(tmp_path))
    before = resolve_model_path("tiny-qwen3", seed=0)
    assert resolve_model_path("tiny-qwen3", seed=0) == before
    corpus = tiny_qwen3._tokenizer_corpus()
    monkeypatch.setattr(tiny_qwen3, "_tokenizer_corpus", lambda: [*corpus, "zebra quagga " * 20])
    after = resolve_model_path("tiny-qwen3", seed=0)
    assert after != before
    assert len(AutoTokenizer.from_pretrained(after).tokenize("zebra")) == 1
    assert len(AutoTokenizer.from_pretrained(before).tokenize("zebra")) > 1


def test_loads_with_auto_classes_and_has_qwen3_tokens(tiny_model_dir):
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert model.config.model_type == "qwen3"
    assert 100_000 < sum(p.numel() for p in model.parameters()) < 5_000_000
    for token in SPECIAL_TOKENS + MARKUP_TOKENS:
        ids = tok(token, add_special_tokens=False)["input_ids"]
        assert len(ids) == 1, f"{token} is not a single token"
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "send_slack_message",
            "description": "Post a message to a channel.",
            "parameters": {
                "type": "object",
                "properties": {"channel": {"type": "string"}, "text": {"type": "string"}},
                "required": ["channel", "text"],
            },
        },
    }
]
CALL = {"type": "function", "function": {"name": "send_slack_message", "arguments": {"channel": "eng", "text": "hi"}}}
CONVERSATION = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Tell #eng hi"},
    {"role": "assistant", "content": "", "tool_calls": [CALL]},
    {"role": "tool", "name": "send_slack_message", "content": "sent"},
    {"role": "assistant", "content": "Done."},
]


def test_chat_and_tool_markup_round_trip(tiny_model_dir):
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    text = tok.apply_chat_template(CONVERSATION, tools=TOOLS, tokenize=False)
    for fragment in (
        "<|im_start|>system\nYou are a helpful assistant.",
        "# Tools",
        '"name": "send_slack_message"',
        '<tool_call>\n{"name": "send_slack_message", "arguments": {"channel": "eng", "text": "hi"}}\n</tool_call>',
        "<|im_start|>user\n<tool_response>\nsent\n</tool_response><|im_end|>",
        "<|im_start|>assistant\n",
    ):
        assert fragment in text
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == text


def test_generation_prompt_and_thinking_switch(tiny_model_dir):
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    messages = [{"role": "user", "content": "Which number is larger: 12 or 40?"}]
    plain = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    no_think = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, enable_thinking=False)
    assert plain.endswith("<|im_start|>assistant\n")
    assert no_think.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_trl_parses_tool_calls_from_generated_ids(tiny_model_dir):
    tok = add_response_schema(AutoTokenizer.from_pretrained(tiny_model_dir))
    completion = '<tool_call>\n{"name": "send_slack_message", "arguments": {"channel": "eng", "text": "hi"}}\n</tool_call><|im_end|>'
    parsed = tok.parse_response(tok(completion, add_special_tokens=False)["input_ids"], prefix="")
    assert parsed["tool_calls"][0]["function"] == CALL["function"]


@pytest.mark.parametrize("bad", ["./no/such/dir", "not a model"])
def test_missing_model_path_is_named(bad):
    from training.run_setup.models import resolve_model_path

    with pytest.raises(FileNotFoundError, match=bad.replace(".", r"\.")):
        resolve_model_path(bad)
