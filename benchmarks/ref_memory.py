"""Peak memory of the reference policy: LoRA + reference adapter vs full fine-tuning with a reference model copy.

    cd <repo> && python -m benchmarks.ref_memory [--steps 3] [--write BENCHMARKS.md]

Each variant trains a few GRPO steps with `StrictGRPOTrainer` (beta > 0, so the KL term reads the reference, and
`sync_ref_model=True`) on a CPU-sized Qwen3 (hidden 512, 8 layers, the tiny tokenizer's vocabulary), in a fresh
subprocess so that peak RSS (`ru_maxrss`) belongs to that variant alone:

- `lora_ref`: LoRA r=16 on every linear layer; the reference is the frozen "ref" adapter, synced every step.
- `full_ref`: full fine-tuning; TRL loads a second copy of the model as the reference and syncs it.
- `lora_no_ref`: LoRA with beta=0 (no reference at all), the baseline the adapter's own cost is read against.

On demand only; not part of the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

VARIANTS = ("lora_ref", "full_ref", "lora_no_ref")
ARCH = dict(
    hidden_size=512,
    intermediate_size=1536,
    num_hidden_layers=8,
    num_attention_heads=8,
    num_key_value_heads=4,
    head_dim=64,
    max_position_embeddings=1024,
    rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
    tie_word_embeddings=True,
)
SECTION_START = "<!-- ref_memory:start -->"
SECTION_END = "<!-- ref_memory:end -->"


def build_model_dir(out: Path) -> Path:
    """Write the CPU-sized Qwen3 (random weights, the tiny tokenizer) once."""
    if (out / "model.safetensors").exists():
        return out
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from training.run_setup.tiny_qwen3 import build_tokenizer

    tokenizer = build_tokenizer()
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        **ARCH,
    )
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def run_variant(variant: str, model_dir: str, steps: int, out_dir: str) -> dict:
    """Train `steps` GRPO steps in this process and report its peak RSS."""
    import torch

    torch.set_num_threads(1)
    from datasets import Dataset
    from peft import LoraConfig

    from training.run_setup.config import StrictGRPOConfig
    from training.run_setup.prompt_datasets import load_rows
    from training.trainer import StrictGRPOTrainer

    def length_reward(completions, **kwargs):
        return [-float(len(str(c))) for c in completions]

    lora = variant.startswith("lora")
    args = StrictGRPOConfig(
        output_dir=out_dir,
        use_cpu=True,
        seed=0,
        max_steps=steps,
        learning_rate=1e-4,
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=32,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        beta=0.0 if variant == "lora_no_ref" else 0.04,
        sync_ref_model=variant != "lora_no_ref",
        ref_model_sync_steps=1,
        chat_template_kwargs={"enable_thinking": False},
    )
    peft_config = (
        LoraConfig(
            r=16,
            lora_alpha=32,
            target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
            task_type="CAUSAL_LM",
        )
        if lora
        else None
    )
    started = time.perf_counter()
    trainer = StrictGRPOTrainer(
        model=model_dir,
        reward_funcs=[length_reward],
        args=args,
        train_dataset=Dataset.from_list(load_rows("data/larger_number/train.jsonl")[:64]),
        peft_config=peft_config,
    )
    trainer.train()
    model = trainer.model
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    ref_params = (
        sum(p.numel() for n, p in model.named_parameters() if ".ref." in n)
        if lora
        else sum(p.numel() for p in trainer.ref_model.parameters())
        if trainer.ref_model is not None
        else 0
    )
    syncs = [h["ref_sync/count"] for h in trainer.state.log_history if "ref_sync/count" in h]
    return {
        "variant": variant,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "total_params": sum(p.numel() for n, p in model.named_parameters() if ".ref." not in n),
        "trainable_params": trainable,
        "reference_params": ref_params,
        "ref_sync_count_last": syncs[-1] if syncs else None,
        "wall_s": time.perf_counter() - started,
    }


def machine() -> str:
    nproc = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
    free = subprocess.run(["free", "-g"], capture_output=True, text=True).stdout.rstrip()
    return f"{platform.platform()}, Python {platform.python_version()}, nproc={nproc}\n\n```\n$ free -g\n{free}\n```"


def render(results: list[dict], steps: int, command: str) -> str:
    import torch
    import transformers
    import trl

    base = next(r for r in results if r["variant"] == "lora_no_ref")["peak_rss_mib"]
    lines = [
        SECTION_START,
        "## Reference policy memory: LoRA + reference adapter vs full fine-tuning + reference copy",
        "",
        f"Command: `{command}`",
        "",
        f"Model: Qwen3 {ARCH['num_hidden_layers']} layers, hidden {ARCH['hidden_size']}, intermediate "
        f"{ARCH['intermediate_size']}, tiny tokenizer vocabulary; float32, CPU. {steps} GRPO steps per variant "
        "(batch 8, 4 generations, 32 completion tokens, beta 0.04, `sync_ref_model=True`, sync every step), "
        "each in a fresh subprocess; peak RSS is the process's `ru_maxrss`.",
        f"torch {torch.__version__}, transformers {transformers.__version__}, trl {trl.__version__}.",
        "",
        "| variant | peak RSS (MiB) | vs LoRA without reference (MiB) | params (policy) | trainable | reference "
        "tensors | wall (s) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        lines.append(
            f"| `{r['variant']}` | {r['peak_rss_mib']:.0f} | {r['peak_rss_mib'] - base:+.0f} | {r['total_params']:,} | "
            f"{r['trainable_params']:,} | {r['reference_params']:,} | {r['wall_s']:.1f} |"
        )
    lines += ["", f"Machine: {machine()}", SECTION_END, ""]
    return "\n".join(lines)


def write_section(path: Path, section: str) -> None:
    """Replace this benchmark's section in `path` (other benchmarks' sections are left as they are)."""
    text = path.read_text() if path.exists() else "# Benchmarks\n\n"
    if SECTION_START in text:
        head, rest = text.split(SECTION_START, 1)
        text = head + section + rest.split(SECTION_END, 1)[1].lstrip("\n")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--write", default=None, help="markdown file to write the results section into")
    parser.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)  # internal: one child process
    parser.add_argument("--model-dir", help=argparse.SUPPRESS)
    parser.add_argument("--json-out", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.variant:
        result = run_variant(args.variant, args.model_dir, args.steps, args.json_out + ".run")
        Path(args.json_out).write_text(json.dumps(result))
        return

    cache = Path(os.environ.get("STRICT_GRPO_CACHE", Path.home() / ".cache" / "strict_grpo"))
    from training.run_setup.tiny_qwen3 import build_fingerprint

    model_dir = build_model_dir(cache / "models" / f"bench-qwen3-h512-l8-{build_fingerprint()}")
    results = []
    for variant in VARIANTS:
        out = cache / "bench" / f"ref_memory_{variant}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "benchmarks.ref_memory", "--variant", variant, "--model-dir", str(model_dir)]
        cmd += ["--steps", str(args.steps), "--json-out", str(out)]
        subprocess.run(cmd, check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
        results.append(json.loads(out.read_text()))
        print(json.dumps(results[-1]), flush=True)
    command = "python -m benchmarks.ref_memory " + " ".join(sys.argv[1:])
    section = render(results, args.steps, command.strip())
    print(section)
    if args.write:
        write_section(Path(args.write), section)


if __name__ == "__main__":
    main()
