"""A Qwen3 of a real model's shape with random weights and the project's tokenizer, built offline: what the GPU check
(benchmarks/gpu_check.py) trains through the 0.6B recipe where no hub weights can be downloaded. Its speed and memory
are the real shape's (the vocabulary aside: the project's ~1.1k tokens, not Qwen3's 151k, so 441M parameters instead
of 596M); its rewards are all 0, so it says nothing about learning.

    python -m benchmarks.qwen3_shaped DIR [--shape 0.6b|tiny] [--dtype bfloat16] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from training.run_setup.tiny_qwen3 import COMPLETE_FILE, TINY_ARCH, build_model, build_tokenizer

# Qwen/Qwen3-0.6B's config.json, but the vocabulary.
QWEN3_0_6B_ARCH = dict(
    hidden_size=1024,
    intermediate_size=3072,
    num_hidden_layers=28,
    num_attention_heads=16,
    num_key_value_heads=8,
    head_dim=128,
    max_position_embeddings=40960,
    rms_norm_eps=1e-6,
    rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
    tie_word_embeddings=True,
)
SHAPES = {"0.6b": QWEN3_0_6B_ARCH, "tiny": TINY_ARCH}


def write_shaped_qwen3(out_dir: str | Path, shape: str, dtype: str = "bfloat16", seed: int = 0) -> Path:
    """Write the model (in `dtype`) and tokenizer to `out_dir` unless a complete copy of the same build is there."""
    out = Path(out_dir)
    build = {"shape": shape, "arch": SHAPES[shape], "dtype": dtype, "seed": seed}
    done = out / COMPLETE_FILE
    if done.is_file() and json.loads(done.read_text()) == build:
        return out
    tokenizer = build_tokenizer()
    device = "cuda" if torch.cuda.is_available() else "cpu"  # random init of 441M parameters: seconds on a GPU
    with torch.device(device):
        model = build_model(tokenizer, seed, arch=SHAPES[shape])
    model.to(getattr(torch, dtype)).save_pretrained(out)
    tokenizer.save_pretrained(out)
    done.write_text(json.dumps(build, indent=2, sort_keys=True))  # last: the directory is complete
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="0.6b")
    parser.add_argument("--dtype", choices=["bfloat16", "float16", "float32"], default="bfloat16")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    out = write_shaped_qwen3(args.out_dir, args.shape, args.dtype, args.seed)
    config = json.loads((out / "config.json").read_text())
    print(json.dumps({"model_dir": str(out), "shape": args.shape, "hidden_size": config["hidden_size"],
                      "num_hidden_layers": config["num_hidden_layers"], "vocab_size": config["vocab_size"]}))


if __name__ == "__main__":
    main()
