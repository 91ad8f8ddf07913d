"""Generation without vLLM: the transformers sampler with its default dynamic KV cache, with a static KV cache, and with
a static cache whose forward transformers compiles (`torch.compile`, on CUDA only), measured on one model: tokens per
second, and the gap between the log-probs the sampler records (training/algorithms/sampled_logprobs.py, as
record-at-sample records them) and a full forward's (as the loss computes them). A mode is usable for training only
if that gap stays within the precision's normal (training/step/sampler_gap.py).

    python -m benchmarks.sampler_modes --model DIR [--build-shape 0.6b] [--dtype bfloat16] [--batch 16]
        [--new-tokens 64] [--repeats 2]

Prints one JSON object. The recipe field that switches modes is TRL's `cache_implementation: static` (compiled by
transformers on CUDA unless `generation_kwargs: {disable_compile: true}`). The default stays the dynamic cache until
a GPU measurement shows a mode faster at the same log-probs (docs/launchers.md, "The GPU check").
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

from benchmarks.qwen3_shaped import SHAPES, write_shaped_qwen3
from training.algorithms.sampled_logprobs import sampled_token_logprobs
from training.run_setup.prompt_datasets import load_rows
from training.step.sampler_gap import NORMAL_MEAN_GAP

MODES = {
    "dynamic": {},
    "static": {"cache_implementation": "static", "disable_compile": True},
    "static_compiled": {"cache_implementation": "static"},  # transformers compiles the forward (CUDA)
}
PROMPTS = "data/larger_number/train.jsonl"


def prompt_batch(tokenizer, batch: int, device) -> dict:
    rows = load_rows(PROMPTS)[:batch]
    texts = [tokenizer.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True,
                                           enable_thinking=False) for r in rows]
    tokenizer.padding_side = "left"
    return tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(device)


def sample(model, inputs: dict, settings: dict, new_tokens: int, temperature: float, seed: int):
    """One sampling pass: the completion ids (every row `new_tokens` long) and each token's raw logits."""
    config = GenerationConfig(do_sample=True, temperature=temperature, top_k=0, top_p=1.0, max_new_tokens=new_tokens,
                              min_new_tokens=new_tokens, pad_token_id=model.generation_config.pad_token_id,
                              eos_token_id=model.generation_config.eos_token_id, **settings)
    torch.manual_seed(seed)
    out = model.generate(**inputs, generation_config=config, output_logits=True, return_dict_in_generate=True)
    return out.sequences[:, inputs["input_ids"].size(1):], out.logits


@torch.no_grad()
def full_forward_logprobs(model, inputs: dict, completion: torch.Tensor, temperature: float) -> torch.Tensor:
    """The completion tokens' log-probs from one forward over prompt + completion, as the loss computes them."""
    ids = torch.cat([inputs["input_ids"], completion], dim=1)
    mask = torch.cat([inputs["attention_mask"], torch.ones_like(completion)], dim=1)
    logits = model(input_ids=ids, attention_mask=mask).logits[:, -completion.size(1) - 1:-1].float() / temperature
    return torch.log_softmax(logits, dim=-1).gather(-1, completion.unsqueeze(-1)).squeeze(-1)


def measure(model, inputs: dict, mode: str, new_tokens: int, repeats: int, temperature: float, precision: str) -> dict:
    settings = MODES[mode]
    sync = torch.cuda.synchronize if model.device.type == "cuda" else (lambda: None)
    start = time.perf_counter()
    sample(model, inputs, settings, new_tokens, temperature, seed=0)  # warm-up: the cache, and compilation
    sync()
    warmup_s = time.perf_counter() - start
    times, gaps, max_gaps = [], [], []
    for repeat in range(repeats):
        sync()
        start = time.perf_counter()
        completion, logits = sample(model, inputs, settings, new_tokens, temperature, seed=1 + repeat)
        sync()
        times.append(time.perf_counter() - start)
        recorded = torch.tensor(sampled_token_logprobs(logits, completion.tolist(), temperature), device=model.device)
        gap = (recorded - full_forward_logprobs(model, inputs, completion, temperature)).abs()
        gaps.append(gap.mean().item())
        max_gaps.append(gap.max().item())
    seconds = statistics.median(times)
    mean_gap = max(gaps)
    return {
        "status": "measured",
        "settings": settings,
        "warmup_s": round(warmup_s, 3),
        "seconds": round(seconds, 4),
        "tokens_per_s": round(completion.numel() / seconds, 1),
        "ms_per_token_step": round(1000 * seconds / new_tokens, 2),
        "logp_abs_diff": mean_gap,
        "logp_abs_diff_max": max(max_gaps),
        "within_tolerance": mean_gap <= NORMAL_MEAN_GAP[precision],
    }


def compare(model_dir: str, dtype: str, batch: int, new_tokens: int, repeats: int, temperature: float = 1.0,
            device: str | None = None) -> dict:
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, dtype)).to(device).eval()
    inputs = prompt_batch(tokenizer, batch, device)
    results: dict = {"device": device, "dtype": dtype, "batch": batch, "new_tokens": new_tokens,
                     "tolerance": NORMAL_MEAN_GAP[dtype], "modes": {}}
    for mode in MODES:
        if mode == "static_compiled" and device != "cuda":
            results["modes"][mode] = {"status": "not run: transformers compiles generate's forward only on CUDA"}
            continue
        try:
            results["modes"][mode] = measure(model, inputs, mode, new_tokens, repeats, temperature, dtype)
        except Exception as err:  # one mode failing (e.g. a compile error) is reported, the others still measured
            results["modes"][mode] = {"status": "failed", "error": f"{type(err).__name__}: {err}"[:1000]}
    measured = {m: r for m, r in results["modes"].items() if r["status"] == "measured"}
    base = measured.get("dynamic")
    for r in measured.values():
        r["speedup_vs_dynamic"] = round(r["tokens_per_s"] / base["tokens_per_s"], 3) if base else None
    usable = {m: r for m, r in measured.items() if r["within_tolerance"]}
    results["fastest_within_tolerance"] = max(usable, key=lambda m: usable[m]["tokens_per_s"]) if usable else None
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--dtype", choices=sorted(NORMAL_MEAN_GAP), default="bfloat16")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--device", default=None, help="default: cuda when available, else cpu")
    parser.add_argument("--build-shape", choices=sorted(SHAPES), default=None,
                        help="first build the Qwen3-shaped random model of this shape into --model (once; "
                        "benchmarks/qwen3_shaped.py), in --dtype")
    args = parser.parse_args(argv)
    built = None
    if args.build_shape:
        built = {"model_dir": str(write_shaped_qwen3(args.model, args.build_shape, args.dtype)),
                 "shape": args.build_shape, "dtype": args.dtype}
    result = compare(args.model, args.dtype, args.batch, args.new_tokens, args.repeats, device=args.device)
    print(json.dumps({**result, "model": built or {"model_dir": args.model}}))


if __name__ == "__main__":
    main()
