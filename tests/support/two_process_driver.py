"""`training.train` under `accelerate launch`, with probes that let tests/test_two_process_cpu.py check each rank.

Run as a script (not imported by pytest): `accelerate launch ... tests/support/two_process_driver.py --config ...`.
Every rank writes `rank{R}.jsonl` into `$TWO_PROC_PROBE_DIR`: one `batch` record per generation batch (the local
prompts, the local advantages), one `scored` record per reward-function call (what this rank scored and the
rewards it gave), and a final `params` record (a hash of every LoRA tensor, of every adapter, after training).
The recipe names the reward as `__main__.recording_reward`, which `training.train` imports from this script.
"""

from __future__ import annotations

import hashlib
import json
import os
import zlib
from pathlib import Path

import training.train as train_entry
from training.step.distributed import full_weights_for_generation
from training.tasks.larger_number.rewards import completion_text
from training.trainer import StrictGRPOTrainer

PROBE_DIR = Path(os.environ["TWO_PROC_PROBE_DIR"])


def _rank() -> int:
    return int(os.environ.get("RANK", "0"))


def _record(kind: str, **fields) -> None:
    with open(PROBE_DIR / f"rank{_rank()}.jsonl", "a") as f:
        f.write(json.dumps({"kind": kind, "rank": _rank(), **fields}) + "\n")


def _prompt_text(prompt) -> str:
    return prompt if isinstance(prompt, str) else prompt[-1]["content"]


def recording_reward(prompts, completions, trainer_state=None, **kwargs) -> list[float]:
    """A deterministic reward with spread (a checksum of the text mod 5); logs what this rank scored."""
    rewards = [float(zlib.crc32(completion_text(c).encode()) % 5) for c in completions]
    if trainer_state is not None:  # a GRPO step, not the held-out evaluation
        _record(
            "scored",
            step=trainer_state.global_step,
            prompts=[_prompt_text(p) for p in prompts],
            completions=[completion_text(c) for c in completions],
            rewards=rewards,
        )
    return rewards


def half_constant_reward(prompts, completions, trainer_state=None, **kwargs) -> list[float]:
    """`recording_reward`, but 1.0 for every completion of the prompts whose checksum is even: about half the groups
    have all-equal rewards, so the zero-std streak moves (up and back to 0) from step to step."""
    rewards = recording_reward(prompts, completions, trainer_state, **kwargs)
    return [1.0 if zlib.crc32(_prompt_text(p).encode()) % 2 == 0 else r for p, r in zip(prompts, rewards)]


class ProbedTrainer(StrictGRPOTrainer):
    """Records each rank's share of every generation batch, and the adapter weights after training."""

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        _record(
            "batch",
            step=self.state.global_step,
            world_size=self.accelerator.num_processes,
            prompts=[_prompt_text(x["prompt"]) for x in inputs],
            advantages=output["advantages"].tolist(),
        )
        return output

    def train(self, *args, **kwargs):
        result = super().train(*args, **kwargs)
        model = self.accelerator.unwrap_model(self.model)
        # Under ZeRO-3 each rank holds only shards: gather the full tensors before hashing them.
        with full_weights_for_generation(model, self.accelerator):
            lora = {n: p.detach().cpu().clone() for n, p in model.named_parameters() if "lora_" in n}
            # Non-trainable adapters (a frozen reference copy, issue 5) show up in the state dict only.
            state = model.state_dict()
            lora.update({n: t.detach().cpu().clone() for n, t in state.items() if "lora_" in n and n not in lora})
        hashes = {n: hashlib.sha256(t.contiguous().float().numpy().tobytes()).hexdigest() for n, t in lora.items()}
        _record(
            "params",
            hashes=hashes,
            numel=sum(t.numel() for t in lora.values()),
            adapters=sorted(getattr(model, "peft_config", {}) or {}),
            deepspeed_zero_stage=(
                self.accelerator.state.deepspeed_plugin.zero_stage if self.is_deepspeed_enabled else None
            ),
            engine=type(self.model_wrapped).__name__,
        )
        return result


if __name__ == "__main__":
    train_entry.StrictGRPOTrainer = ProbedTrainer
    train_entry.cli()
