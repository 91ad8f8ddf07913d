"""One command that checks a GPU machine and writes one JSON report.

    python -m benchmarks.gpu_check [--wheels DIR] [--out FILE] [--budget-s 480]     # on a CUDA machine
    python -m benchmarks.gpu_check --dry-run [--out FILE]                            # the same plan, on CPU, tiny

From a checkout (and a folder of wheels when the machine lacks packages; no network), in order:

1. `install`: what the machine lacks for the project and the check (benchmarks/gpu_check_install.py), installed from
   `--wheels` with pip --no-index (a dry run only resolves);
2. `environment`: Python, torch, CUDA, the GPU, library versions, the commit;
3. `pytest_gpu`: `python -m pytest -m "gpu or vllm"` (counts, and why tests skipped: the vLLM ones where its
   wheel was not carried);
4. `causal_fp32`: the causal recipe through launchers/launch_gpu.sh in float32 (`--bf16 false`), 2 steps: the first
   step's PPO ratio must be 1 to 1e-5 (mean and std) and the loss forward free of autocast;
5. `causal_bf16`: the same in bf16 (`--bf16 true`), with no log-prob flag: the gap must be measured by default; the
   report gives it (mean, max, ratio std) against bf16's normal;
6. `sampler_modes`: builds a Qwen3-0.6B-shaped model with random weights offline (benchmarks/qwen3_shaped.py), then
   measures the transformers sampler on it with a dynamic cache, a static cache, and a static cache compiled by
   transformers (benchmarks/sampler_modes.py): tokens per second and the recorded log-probs' gap to a full forward;
7. `qwen3_0.6b`: that model through recipes/qwen3_0.6b_lora.yaml, 4 steps: step time, peak GPU memory, generation
   tokens per second.

`--dry-run` runs the same plan on CPU with tiny settings (launchers/launch_cpu.sh, the tiny model shape, a few
tokens; the compiled mode is not run: transformers compiles generation only on CUDA), so that one call on a GPU is
enough. Every step runs in its own process under a time limit taken from the budget (8 minutes on a GPU by
default); a failed step is recorded with its output's tail and the rest still run; the report is rewritten after
each step. Exit 0 when every step passed, 1 otherwise (without CUDA the environment step fails unless --dry-run).

This module imports only the standard library: it must start on a machine that lacks the project's packages.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks.gpu_check_install import REPO, install

FP32_RATIO_TOLERANCE = 1e-5
REPORT_VERSION = 1


class StepFailed(Exception):
    """A step ran but its result is wrong; the message says how."""


def run_bounded(cmd: list[str], timeout_s: float, env: dict, log: Path) -> subprocess.CompletedProcess:
    """Run `cmd` from the repository root in its own process group, output to `log`; past `timeout_s` the whole group
    is killed (accelerate launch starts the training processes as its children) and TimeoutExpired raised."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as sink:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=sink, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
    return subprocess.CompletedProcess(cmd, proc.returncode, log.read_text(errors="replace"), "")


def tail(text: str, chars: int = 3000) -> str:
    return text[-chars:]


def json_line(text: str) -> dict:
    """The last line of `text` that is a JSON object."""
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise StepFailed(f"no JSON result in the output: {tail(text, 1500)}")


class GpuCheck:
    def __init__(self, dry_run: bool, out: Path, wheels: str | None, budget_s: float):
        self.dry_run = dry_run
        self.out = out
        self.work = out.parent / f"{out.stem}_runs"
        self.wheels = wheels
        self.model_dir: str | None = None  # the Qwen3-shaped model, built once
        self.lock = threading.Lock()
        self.deadline = time.monotonic() + budget_s
        self.started = time.monotonic()
        self.env = dict(os.environ, PYTHON=sys.executable, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
        # the recipes decide the precision (training/run_setup/precision.py)
        removed = self.env.pop("ACCELERATE_MIXED_PRECISION", None)
        if dry_run:  # tiny matrices: one thread each (2 threads on 2 busy cores made generation 100x slower)
            self.env["OMP_NUM_THREADS"] = "1"
        self.report: dict = {
            "report_version": REPORT_VERSION, "mode": "dry-run (CPU, tiny settings)" if dry_run else "gpu",
            "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "budget_s": budget_s,
            "removed_from_environment": {"ACCELERATE_MIXED_PRECISION": removed} if removed else {},
            "steps": {}, "passed": None,
        }

    # ---- running steps ----------------------------------------------------------------------------------------
    def left_s(self) -> float:
        return self.deadline - time.monotonic()

    def step(self, name: str, limit_s: float, fn) -> dict:
        limit = min(limit_s, self.left_s())
        start = time.monotonic()
        if limit < 10:
            result = {"status": "not run", "why": f"the check's budget of {self.report['budget_s']} s is spent"}
        else:
            try:
                result = {"status": "passed", **fn(limit)}
            except subprocess.TimeoutExpired:
                result = {"status": "failed", "error": f"timed out after {limit:.0f} s"}
            except StepFailed as err:
                result = {"status": "failed", "error": str(err)}
            except Exception as err:  # a bug in the step itself: recorded, and the remaining steps still run
                result = {"status": "failed", "error": f"{type(err).__name__}: {err}"}
        result["seconds"] = round(time.monotonic() - start, 1)
        self.report["steps"][name] = result
        self.write()
        print(f"[gpu_check] {name}: {result['status']} ({result['seconds']} s)"
              + (f": {result.get('error', '')[:300]}" if result["status"] == "failed" else ""), flush=True)
        return result

    def write(self) -> None:
        with self.lock:
            self.report["total_s"] = round(time.monotonic() - self.started, 1)
            self.out.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.out.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.report, indent=2, sort_keys=False, default=str) + "\n")
            tmp.replace(self.out)

    def python(self, *args: str, limit: float, log: str) -> subprocess.CompletedProcess:
        proc = run_bounded([sys.executable, *args], limit, self.env, self.work / f"{log}.log")
        if proc.returncode != 0:
            raise StepFailed(f"{' '.join(args[:3])} exited {proc.returncode}: {tail(proc.stdout)}")
        return proc

    # ---- the steps --------------------------------------------------------------------------------------------
    def install(self, limit: float) -> dict:
        result = install(self.wheels, self.dry_run, limit)
        if result.pop("status") != "passed":
            raise StepFailed(json.dumps(result)[-3000:])
        return result

    def environment(self, limit: float) -> dict:
        env = json_line(self.python("-m", "benchmarks.machine", limit=limit, log="environment").stdout)
        self.report["machine"] = env
        accelerate = Path(sys.executable).with_name("accelerate")
        accelerate = str(accelerate) if accelerate.exists() else shutil.which("accelerate")
        if accelerate is None:
            raise StepFailed("no `accelerate` executable next to this Python or on PATH: the launchers need it")
        self.env["ACCELERATE"] = accelerate
        if not self.dry_run and not env["cuda_available"]:
            raise StepFailed("no CUDA GPU is visible: run with --dry-run to rehearse on CPU")
        return {"accelerate": accelerate}

    def pytest_gpu(self, limit: float) -> dict:
        xml = self.work / "pytest_gpu.xml"
        proc = run_bounded([sys.executable, "-m", "pytest", "-m", "gpu or vllm", "-n", "0", "-q", "-p",
                            "no:cacheprovider", f"--junitxml={xml}"], limit, self.env, self.work / "pytest_gpu.log")
        counts = junit_counts(xml)
        if proc.returncode not in (0, 5) or counts["failed"] or counts["errors"]:  # 5: nothing collected
            raise StepFailed(f"pytest -m 'gpu or vllm' exited {proc.returncode}: {json.dumps(counts)} {tail(proc.stdout)}")
        if not self.dry_run and not counts["passed"]:
            raise StepFailed(f"no gpu test passed on the GPU: {json.dumps(counts)}")
        return counts

    def launch(self, name: str, recipe: str, args: list[str], limit: float) -> tuple[list[dict], dict, str]:
        """A training run through the launcher this machine calls for (GPU: launch_gpu.sh on one process; dry run:
        launch_cpu.sh); its step rows from metrics.jsonl, its run_summary.json and the launched command."""
        out = self.work / name
        launcher = ["launchers/launch_cpu.sh"] if self.dry_run else ["launchers/launch_gpu.sh", "--num-processes", "1"]
        cmd = ["bash", *launcher, "--recipe", recipe, *args, "--output_dir", str(out), "--overwrite_output_dir",
               "true", "--report_to", "none"]
        proc = run_bounded(cmd, limit, self.env, self.work / f"{name}.log")
        command = next((line[len("Command: "):] for line in proc.stdout.splitlines() if line.startswith("Command: ")),
                       None)
        if proc.returncode != 0:
            raise StepFailed(f"{' '.join(cmd[:4])} ... exited {proc.returncode}: {tail(proc.stdout)}")
        rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
        return [r for r in rows if "loss" in r], json.loads((out / "run_summary.json").read_text()), command

    def device_args(self) -> list[str]:
        return ["--use_cpu", "true"] if self.dry_run else ["--use_cpu", "false"]

    def causal_args(self) -> list[str]:
        tiny = ["--per_device_train_batch_size", "2", "--num_generations", "2", "--max_completion_length", "64",
                "--dynamic_sampling_max_rounds", "1", "--max_steps", "1", "--heldout_max_samples", "1"]
        return [*self.device_args(), "--strict_health", "false",
                *(tiny if self.dry_run else ["--max_steps", "2", "--heldout_max_samples", "4"])]

    def causal_fp32(self, limit: float) -> dict:
        rows, summary, command = self.launch("causal_fp32", "recipes/causal_cpu.yaml",
                                             [*self.causal_args(), "--bf16", "false", "--logp_check_steps", "1"], limit)
        first = rows[0]
        result = {"command": command, **run_numbers(rows, summary),
                  "first_ratio": {k: first.get(f"ratio/{k}") for k in ("mean", "std", "min", "max")}}
        ratio = result["first_ratio"]
        off = ratio["mean"] is None or abs(ratio["mean"] - 1) > FP32_RATIO_TOLERANCE
        if off or ratio["std"] > FP32_RATIO_TOLERANCE:
            raise StepFailed(f"float32: the first PPO ratio is not 1 to {FP32_RATIO_TOLERANCE}: {json.dumps(result)}")
        if summary["precision"]["loss_forward"]["autocast_dtype"] is not None:
            raise StepFailed(f"float32 recipe, but the loss forward ran under autocast: {summary['precision']}")
        return result

    def causal_bf16(self, limit: float) -> dict:
        rows, summary, command = self.launch("causal_bf16", "recipes/causal_cpu.yaml",
                                             [*self.causal_args(), "--bf16", "true"], limit)
        result = {"command": command, **run_numbers(rows, summary),
                  "first_ratio": {k: rows[0].get(f"ratio/{k}") for k in ("mean", "std", "min", "max")}}
        if "sampling/logp_abs_diff" not in rows[0]:
            raise StepFailed(f"bf16 run without a flag: sampling/logp_abs_diff was not measured: {json.dumps(result)}")
        if summary["precision"]["loss_forward"]["autocast_dtype"] != "bfloat16":
            raise StepFailed(f"bf16 recipe, but the loss forward was not under bf16 autocast: {summary['precision']}")
        return result

    def qwen3_0_6b(self, limit: float) -> dict:
        model_dir = self.model_dir
        if model_dir is None:
            raise StepFailed("no Qwen3-shaped model: the sampler_modes step, which builds it, did not")
        tiny = ["--bf16", "false", "--dtype", "float32", "--max_steps", "2", "--per_device_train_batch_size", "2",
                "--num_generations", "2", "--max_completion_length", "8", "--heldout_max_samples", "1"]
        full = ["--max_steps", "4", "--heldout_max_samples", "8"]
        args = [*self.device_args(), "--model_name_or_path", model_dir, "--strict_health", "false",
                "--heldout_eval_steps", "0", *(tiny if self.dry_run else full)]
        rows, summary, command = self.launch("qwen3_0.6b", "recipes/qwen3_0.6b_lora.yaml", args, limit)
        return {"command": command, "model": self.report["model"], **run_numbers(rows, summary),
                **generation_speed(rows, summary), "stopped_reason": summary["stopped_reason"]}

    def sampler_modes(self, limit: float) -> dict:
        """Builds the Qwen3-shaped model (the 0.6B shape in bf16; dry run: the tiny shape in float32) for this step
        and the next, then measures the sampler's modes on it."""
        shape, dtype = ("tiny", "float32") if self.dry_run else ("0.6b", "bfloat16")
        cache = Path(os.environ.get("STRICT_GRPO_CACHE", Path.home() / ".cache" / "strict_grpo"))
        sizes = (["--batch", "4", "--new-tokens", "8", "--repeats", "1", "--device", "cpu"] if self.dry_run
                 else ["--batch", "16", "--new-tokens", "64", "--repeats", "2"])
        result = json_line(self.python("-m", "benchmarks.sampler_modes", "--model",
                                       str(cache / "models" / f"qwen3-{shape}-shaped"), "--build-shape", shape,
                                       "--dtype", dtype, *sizes, limit=limit, log="sampler_modes").stdout)
        self.report["model"] = result["model"]
        self.model_dir = result["model"]["model_dir"]
        expected = {"dynamic", "static"} | (set() if self.dry_run else {"static_compiled"})
        wrong = {m: r for m, r in result["modes"].items()
                 if m in expected and (r["status"] != "measured" or not r["within_tolerance"])}
        if wrong:
            raise StepFailed(f"sampler modes not measured or off tolerance: {json.dumps(wrong)[:3000]}")
        result["default"] = ("unchanged (the dynamic cache): a mode becomes the default only once a GPU report shows "
                             "it faster at the same log-probs and that is reviewed; see docs/launchers.md")
        return result

    def run(self, jobs: int = 1) -> int:
        """The plan in order; with `jobs` > 1 (dry runs only: on a GPU the steps would share it and their timings
        would mean nothing) the steps that need nothing from each other run side by side."""
        self.step("install", 150, self.install)
        environment = self.step("environment", 90, self.environment)
        independent = [("pytest_gpu", 150, self.pytest_gpu), ("causal_fp32", 150, self.causal_fp32),
                       ("causal_bf16", 120, self.causal_bf16), ("sampler_modes", 200, self.sampler_modes)]
        then = [("qwen3_0.6b", 200, self.qwen3_0_6b)]  # trains the model sampler_modes builds
        plan = [name for name, _, _ in independent + then]
        if environment["status"] != "passed":
            for name in plan:
                self.report["steps"][name] = {"status": "not run", "why": "the environment step failed"}
        else:
            with ThreadPoolExecutor(max_workers=jobs) as pool:
                list(pool.map(lambda step: self.step(*step), independent))
            for step in then:
                self.step(*step)
        steps = self.report["steps"]
        self.report["steps"] = {name: steps[name] for name in ["install", "environment", *plan]}
        self.report["passed"] = all(s["status"] == "passed" for s in self.report["steps"].values())
        self.write()
        print(f"[gpu_check] report: {self.out} ({'passed' if self.report['passed'] else 'FAILED'}, "
              f"{self.report['total_s']} s)", flush=True)
        return 0 if self.report["passed"] else 1


# ---- reading results --------------------------------------------------------------------------------------------
def junit_counts(xml: Path) -> dict:
    import xml.etree.ElementTree as ET

    if not xml.exists():
        raise StepFailed(f"pytest wrote no report at {xml}")
    cases = list(ET.parse(xml).getroot().iter("testcase"))
    # A module that skips itself while collected (pytest.importorskip: DeepSpeed is in the `gpu` extra) is one
    # "collection skipped" case, its reason in the text; it is not a test, so it is listed apart, by module.
    modules = {c.get("name"): c.find("skipped").text for c in cases
               if c.find("skipped") is not None and c.find("skipped").get("message") == "collection skipped"}
    cases = [c for c in cases if c.get("classname") or c.get("name") not in modules]
    skipped = {f"{c.get('classname')}.{c.get('name')}": c.find("skipped").get("message") for c in cases
               if c.find("skipped") is not None}
    failed = [c for c in cases if c.find("failure") is not None]
    errors = [c for c in cases if c.find("error") is not None]
    return {"collected": len(cases), "passed": len(cases) - len(skipped) - len(failed) - len(errors),
            "failed": len(failed), "errors": len(errors), "skipped": skipped, "modules_skipped": modules}


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def run_numbers(rows: list[dict], summary: dict) -> dict:
    """Step time (the median over the steps after the first, which also warms up), the sampler gap, the precision
    in force and the peak GPU memory of a run."""
    later = rows[1:] or rows
    return {
        "steps": len(rows),
        "step_time_s": median([r["step_time"] for r in later if "step_time" in r]),
        "first_step_time_s": rows[0].get("step_time") if rows else None,
        "sampler_gap": summary["sampler_gap"],
        "ratio_std": [r.get("ratio/std") for r in rows],
        "precision": summary["precision"],
        "gpu_memory": summary["gpu_memory"],
    }


def generation_speed(rows: list[dict], summary: dict) -> dict:
    """Generated tokens per second over the steps after the first: each generation makes per_device_train_batch_size
    x steps_per_generation completions of `completions/mean_length` tokens in `timing/generate_s`."""
    args = summary["training_args"]
    completions = args["per_device_train_batch_size"] * args["steps_per_generation"]
    later = [r for r in (rows[1:] or rows) if "timing/generate_s" in r]
    tokens = sum(r["completions/mean_length"] * completions for r in later)
    seconds = sum(r["timing/generate_s"] for r in later)
    longest = [r["completions/max_length"] for r in later]
    return {
        "generation_s": median([r["timing/generate_s"] for r in later]),
        "generated_tokens_per_s": round(tokens / seconds, 1) if seconds else None,
        "ms_per_decoding_step": round(1000 * seconds / sum(longest), 1) if longest and sum(longest) else None,
        "completions_per_generation": completions,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dry-run", action="store_true", help="the same plan on CPU with tiny settings")
    parser.add_argument("--wheels", help="folder of wheels to install missing packages from (pip --no-index)")
    parser.add_argument("--out", type=Path, default=None,
                        help="report path (default runs/gpu_check/report.json, dry run: runs/gpu_check/dry_run.json)")
    parser.add_argument("--budget-s", type=float, default=480.0, help="wall-time budget of the whole check")
    parser.add_argument("--jobs", type=int, default=1,
                        help="dry run only: independent steps side by side (the default test uses 2)")
    args = parser.parse_args(argv)
    if args.jobs > 1 and not args.dry_run:
        parser.error("--jobs > 1 is for dry runs: on a GPU the steps would share it and their timings mean nothing")
    out = args.out or REPO / "runs" / "gpu_check" / ("dry_run.json" if args.dry_run else "report.json")
    return GpuCheck(args.dry_run, out.resolve(), args.wheels, args.budget_s).run(args.jobs)


if __name__ == "__main__":
    sys.exit(main())
