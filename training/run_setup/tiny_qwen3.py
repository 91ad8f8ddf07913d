"""An offline tiny Qwen3: a `Qwen3ForCausalLM` built from `Qwen3Config` plus a byte-level BPE tokenizer that
carries Qwen3's special tokens and Qwen3's own chat template (as TRL ships it, so TRL recognises it for tool-call
parsing). Deterministic: the same seed and arguments give byte-identical files.

    python -m training.run_setup.tiny_qwen3 DIR [--seed 0]
"""

from __future__ import annotations

import argparse
import hashlib
import json
from importlib import resources
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

from training.run_setup import tasks

# Qwen3's own added tokens; the first three are special (skipped when decoding with skip_special_tokens).
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MARKUP_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"]

# Written last by `write_tiny_qwen3`: a directory without it was not completely written.
COMPLETE_FILE = "tiny_qwen3.json"

BPE_VOCAB_SIZE = 1024  # upper bound before the added tokens: 256 byte symbols + the merges the corpus yields

TINY_ARCH = dict(
    hidden_size=128,
    intermediate_size=384,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=32,
    max_position_embeddings=1024,
    rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
    tie_word_embeddings=True,
)


def qwen3_chat_template() -> str:
    """Qwen3's chat template exactly as TRL stores it (TRL identifies the model family by this exact text)."""
    return resources.files("trl").joinpath("chat_templates/qwen3.jinja").read_text()


def _tokenizer_corpus() -> list[str]:
    """Text the BPE merges are learned from: digits, task words, chat and tool-call markup. Fixed, not sampled.

    Tasks add their words (each `Task`'s `tokenizer_lines`, training/run_setup/tasks.py): the bundled workspace tasks' words
    become single tokens, so that copying a channel or a message from the request into a tool call is a few tokens,
    not a dozen byte pieces (a 2-layer model learns the former)."""
    lines = [
        "Which number is larger? Answer with the number only.",
        "You are a helpful assistant. Think step by step.",
        "The answer is the larger of the two numbers.",
        '{"name": "send_slack_message", "arguments": {"channel": "general", "text": "hello"}}',
        '{"name": "create_ticket", "arguments": {"title": "Login bug", "body": "Users cannot log in", "priority": "high"}}',
        '{"name": "read_channel", "arguments": {"channel": "eng"}}  {"name": "list_channels", "arguments": {}}',
        '{"name": "search_messages", "arguments": {"query": "deploy"}}',
        "# Tools\n\nYou may call one or more functions to assist with the user query.",
        "You are provided with function signatures within <tools></tools> XML tags:",
        "For each function call, return a json object with function name and arguments within XML tags:",
        '{"type": "function", "function": {"name": "x", "description": "y", "parameters": {"type": "object", '
        '"properties": {}, "required": []}}}',
        "system user assistant tool low medium high urgent channel text title body priority query",
    ]
    numbers = [" ".join(str(n) for n in range(start, start + 20)) for start in range(0, 200, 20)]
    return lines * 4 + numbers * 4 + tasks.tokenizer_lines()


def build_tokenizer() -> PreTrainedTokenizerFast:
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=BPE_VOCAB_SIZE,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(_tokenizer_corpus(), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=SPECIAL_TOKENS,
        model_max_length=1024,
        clean_up_tokenization_spaces=False,
    )
    tokenizer.add_tokens(MARKUP_TOKENS, special_tokens=False)
    tokenizer.chat_template = qwen3_chat_template()
    return tokenizer


def build_model(tokenizer: PreTrainedTokenizerFast, seed: int, arch: dict | None = None) -> Qwen3ForCausalLM:
    """A randomly initialised Qwen3 of shape `arch` (default `TINY_ARCH`) for `tokenizer`, seeded."""
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        **(TINY_ARCH if arch is None else arch),
    )
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config)
    model.generation_config.eos_token_id = [
        tokenizer.convert_tokens_to_ids("<|im_end|>"),
        tokenizer.convert_tokens_to_ids("<|endoftext|>"),
    ]
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def build_fingerprint() -> str:
    """Short hash of everything that decides the built files but the seed (the corpus and settings, this module's
    source, the library versions): a cache keyed by it never serves a model built by older code."""
    from training.run_setup.build_keys import numerics, source_digest

    payload = json.dumps([_tokenizer_corpus(), BPE_VOCAB_SIZE, TINY_ARCH, SPECIAL_TOKENS, MARKUP_TOKENS,
                          source_digest(__name__), numerics(threads=False)])
    return hashlib.sha256(payload.encode()).hexdigest()[:8]


def write_tiny_qwen3(out_dir: str | Path, seed: int = 0) -> Path:
    """Write a loadable tiny Qwen3 checkpoint (model, tokenizer, chat template) to `out_dir`; `COMPLETE_FILE` last."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer()
    model = build_model(tokenizer, seed)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / COMPLETE_FILE).write_text(json.dumps({"seed": seed, "arch": TINY_ARCH}, indent=2, sort_keys=True))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Write an offline tiny Qwen3 checkpoint directory.")
    parser.add_argument("out_dir", help="directory to write (created if missing)")
    parser.add_argument("--seed", type=int, default=0, help="weight-initialisation seed")
    args = parser.parse_args(argv)
    out = write_tiny_qwen3(args.out_dir, seed=args.seed)
    n_params = sum(p.numel() for p in Qwen3ForCausalLM.from_pretrained(out).parameters())
    print(f"wrote tiny Qwen3 ({n_params:,} parameters) to {out}")


if __name__ == "__main__":
    main()
