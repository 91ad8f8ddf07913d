"""kill -9 at random points, then `--resume_from_checkpoint true`, over and over: the run ends at exactly max_steps
with nothing lost and no hand cleanup, and its adapter equals an uninterrupted run's bit for bit.

Kill points (seeded): while the tiny-Qwen3 model cache is written, during the warm start, inside a checkpoint write
(the test-only hook `STRICT_GRPO_TEST_KILL_IN_CHECKPOINT`: half of a file, or every file but not the marker), right
after a step was logged, and at a random time (setup, held-out evaluations, the final save and summary); then, at the
end, inside the final evaluation, right after it is recorded and inside the final save (the test-only hook
`STRICT_GRPO_TEST_FAULT`), with a second writer started while one runs (refused: the directory is locked).
`save_total_limit=1`, so a rotation that ran before the newest checkpoint was complete would lose everything.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from training.outputs.checkpoints import MARKER, TEST_KILL_ENV, incompleteness
from training.outputs.fault_injection import TEST_FAULT_ENV
from training.outputs.run_record import INTERRUPTED

pytestmark = pytest.mark.slow

KILLS = 20
MAX_STEPS = 12
ARGS = ["--config", "recipes/tiny_cpu.yaml", "--warm_start_steps", "20",
        "--reward_funcs", "tests.support.tiny_trainer.length_reward", "training.tasks.larger_number.rewards.exact_answer_reward",
        "--reward_weights", "0.05", "1.0", "--per_device_train_batch_size", "16", "--num_generations", "4",
        "--max_completion_length", "12", "--max_steps", str(MAX_STEPS), "--save_steps", "2", "--save_total_limit", "1",
        "--heldout_max_samples", "8", "--heldout_samples_per_prompt", "2", "--heldout_eval_steps", "4",
        "--strict_health", "false", "--disable_tqdm", "true", "--max_wall_time_s", "600"]  # fmt: skip


class Attempt:
    """One `python -m training.train` process, its stderr collected as it comes."""

    def __init__(self, out: Path, cache: Path, resume: bool, extra_env: dict[str, str] | None = None):
        env = {k: v for k, v in os.environ.items() if k not in (TEST_KILL_ENV, TEST_FAULT_ENV)}
        env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(Path.cwd()), STRICT_GRPO_CACHE=str(cache), PYTHONUNBUFFERED="1")
        env.update(extra_env or {})
        cmd = [sys.executable, "-m", "training.train", *ARGS, "--output_dir", str(out)]
        cmd += ["--resume_from_checkpoint", "true"] if resume else []
        self.started = time.monotonic()
        self.started_wall = time.time()
        self.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self.reader = threading.Thread(target=lambda: self.lines.extend(self.proc.stderr), daemon=True)
        self.reader.start()

    def seen(self, text: str) -> bool:
        return any(text in line for line in list(self.lines))

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)

    def wait(self, timeout: float = 600) -> int:
        code = self.proc.wait(timeout=timeout)
        self.reader.join(timeout=10)
        return code


def logged_steps(out: Path) -> list[int]:
    path = out / "metrics.jsonl"
    if not path.exists():
        return []
    steps = []
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue  # a torn last line while the writer runs
        if "loss" in row:
            steps.append(row["step"])
    return steps


def logged_since(out: Path, since: float) -> int:
    """The last step logged in metrics.jsonl once the file changed after `since` (wall clock of the attempt's start)."""
    path = out / "metrics.jsonl"
    if not path.exists() or path.stat().st_mtime <= since:
        return 0
    return max(logged_steps(out), default=0)


def last_complete_step(out: Path) -> int:
    complete = [int(p.name.split("-")[1]) for p in out.glob("checkpoint-*") if incompleteness(p) is None]
    return max(complete, default=0)


def wait_until(attempt: Attempt, condition, timeout: float = 300) -> bool:
    """Poll `condition` until it holds (True) or the attempt ends first (False)."""
    deadline = time.monotonic() + timeout
    while attempt.proc.poll() is None:
        if condition():
            return True
        assert time.monotonic() < deadline, "kill point never reached: " + "".join(attempt.lines[-20:])
        time.sleep(0.01)
    return False


def test_twenty_kills_resume_to_the_uninterrupted_adapter(tmp_path):
    rng = random.Random(20261122)
    out, cache = tmp_path / "killed", tmp_path / "cache-killed"
    ref_out, ref_cache = tmp_path / "clean", tmp_path / "cache-clean"
    started = time.monotonic()

    kills: list[dict] = []
    finished_first: list[str] = []  # attempts that ended before their kill point
    attempts = 0
    attempt = Attempt(ref_out, ref_cache, resume=False)  # the uninterrupted reference, in its own cache
    try:
        assert attempt.wait() == 0, "".join(attempt.lines[-40:])
        reference_s = time.monotonic() - started
        while len(kills) < KILLS:
            done_before = last_complete_step(out)
            if attempts == 0:
                kind = "model_cache"
            elif attempts == 1 and not any((cache / "warm_start").glob("*")):
                kind = "warm_start"
            else:
                kind = rng.choices(["in_checkpoint", "after_logged_step", "random_time"], weights=[4, 4, 3])[0]
            # Every third attempt completes exactly one more checkpoint before its kill; the others are killed before
            # the next checkpoint is complete. So the kills spread over the whole run (checkpoint-10 is reached by
            # the 17th kill, and the last attempt trains steps 11 and 12).
            progress = len(kills) >= 2 and (len(kills) - 2) % 3 == 2 and len(kills) < KILLS - 1
            if progress and kind == "random_time":
                kind = "after_logged_step"
            limit = min(done_before + (3 if progress else 1), MAX_STEPS)  # the last step it may log
            if kind == "in_checkpoint" and done_before >= MAX_STEPS:
                kind = "random_time"
            hook = {}
            if kind == "in_checkpoint":
                step = min(done_before + (4 if progress else 2), MAX_STEPS)
                hook = {TEST_KILL_ENV: f"{step}:{rng.randint(1, 5)}"}  # 1-4: half a torch.save file; 5: no marker
            attempt = Attempt(out, cache, resume=attempts > 0, extra_env=hook)
            attempts += 1
            if kind == "model_cache":  # its temporary directory, or (missed) the cache itself: kill at once
                hit = wait_until(attempt, lambda: any((cache / "models").glob("*")))
                hit = hit and any(".tmp-" in p.name for p in (cache / "models").glob("*"))
            elif kind == "warm_start":
                hit = wait_until(attempt, lambda: attempt.seen("Supervised warm start"))
                time.sleep(rng.uniform(0.2, 2.0))
            elif kind == "after_logged_step":  # a step this attempt logged (older lines are cut on resume)
                target = limit
                hit = wait_until(attempt, lambda: logged_since(out, attempt.started_wall) >= target)
                time.sleep(rng.uniform(0.0, 0.1))  # inside the next step (a tiny step takes ~0.2-0.5 s)
            elif kind == "random_time":  # any time (setup, evaluation, a step, a save), within the progress limit
                delay = rng.uniform(1.0, 15.0)
                hit = wait_until(
                    attempt,
                    lambda: time.monotonic() - attempt.started >= delay
                    or logged_since(out, attempt.started_wall) > limit,
                )
            else:  # in_checkpoint: the process kills itself
                hit = True
            if attempt.proc.poll() is None and kind != "in_checkpoint":
                attempt.kill()
            code = attempt.wait()
            if code == 0:
                finished_first.append(kind)
                continue
            assert code == -signal.SIGKILL, f"attempt {attempts} ({kind}) failed:\n" + "".join(attempt.lines[-40:])
            kills.append({
                "kind": kind, "hit": hit, "hook": hook.get(TEST_KILL_ENV),
                "after_s": round(time.monotonic() - attempt.started, 1),
                "complete_before": done_before, "logged_after": max(logged_steps(out), default=0),
            })  # fmt: skip
    finally:
        if attempt is not None and attempt.proc.poll() is None:
            attempt.kill()
            attempt.wait()

    # The end of the run: a second writer while one runs, then a kill inside the final evaluation, right after it is
    # recorded, and inside the final save (the adapter cut to half its bytes).
    for point in ("final_evaluation", "final_evaluation_recorded", "final_save"):
        attempt = Attempt(out, cache, resume=True, extra_env={TEST_FAULT_ENV: f"{point}:kill"})
        attempts += 1
        if point == "final_evaluation":
            assert wait_until(attempt, lambda: attempt.seen("Resuming from checkpoint-"))  # it holds the lock
            attempt.proc.send_signal(signal.SIGSTOP)  # held still (lock and all) until the second writer is refused
            second = Attempt(out, cache, resume=True)
            assert second.wait() == 2, "".join(second.lines[-20:])
            assert f"is in use by another run (pid {attempt.proc.pid} on " in second.lines[-1], second.lines[-1]
            attempt.proc.send_signal(signal.SIGCONT)
        code = attempt.wait()
        assert code == -signal.SIGKILL, f"{point}: " + "".join(attempt.lines[-40:])
        kills.append({"kind": point, "hit": True, "hook": f"{point}:kill", "complete_before": last_complete_step(out)})

    final = Attempt(out, cache, resume=True)
    assert final.wait() == 0, "".join(final.lines[-60:])
    total_s = time.monotonic() - started
    (tmp_path / "kills.json").write_text(json.dumps(kills, indent=1))
    print(f"\n{len(kills)} kills, {attempts + 1} attempts after the reference run ({reference_s:.0f}s), "
          f"{len(finished_first)} finished before their kill point ({finished_first}); "
          f"{total_s:.0f}s in all")  # fmt: skip
    for k in kills:
        print("  ", k)

    # ---- exactly max_steps, each step logged once, one history ---------------------------------------------------
    summary = json.loads((out / "run_summary.json").read_text())
    assert summary["global_step"] == MAX_STEPS and summary["stopped_reason"] == "completed"
    assert logged_steps(out) == list(range(1, MAX_STEPS + 1))
    assert not (out / f"checkpoint-{MAX_STEPS + 1}").exists()
    reference_summary = json.loads((ref_out / "run_summary.json").read_text())
    assert summary["heldout_history"] == reference_summary["heldout_history"]
    assert [h["step"] for h in summary["heldout_history"]] == [0, 4, 8, 12, 12]
    assert summary["heldout_reward_before"] == reference_summary["heldout_reward_before"] is not None
    # Attempts killed before they began (while Python imported the libraries) did no work and left no record.
    ended = [a["ended"] for a in summary["attempts"]]
    assert 2 <= len(ended) <= attempts + 1 and ended[-1] == "completed"
    assert set(ended[:-1]) <= {"completed", INTERRUPTED}
    assert summary["wall_time_s"] == pytest.approx(sum(a["wall_time_s"] for a in summary["attempts"]), abs=0.01)
    assert summary["wall_time_s"] > summary["wall_time_this_attempt_s"]

    # ---- nothing half-written left where a resume would look ----------------------------------------------------
    for path in out.glob("checkpoint-*"):
        assert incompleteness(path) is None, path
    assert not [p.name for p in out.glob("*.tmp-*")]  # killed writers' temporaries, removed by the next writer
    for path in (out / "incomplete").glob("checkpoint-*") if (out / "incomplete").exists() else []:
        assert not (path / MARKER).exists() or incompleteness(path) is not None

    # ---- the same adapter as the uninterrupted run -------------------------------------------------------------
    got, want = (load_file(d / "adapter_model.safetensors") for d in (out, ref_out))
    assert got.keys() == want.keys()
    differing = [k for k in got if not torch.equal(got[k], want[k])]
    assert not differing, f"{len(differing)} of {len(got)} adapter tensors differ"
    # LoRA starts with lora_B = 0: a trained adapter has moved it, so equality is not that of two initialisations
    assert any(got[k].abs().max() > 0 for k in got if "lora_B" in k)
