"""Run a grid of trainings (recipes x variants x sweep x seeds), then evaluate, compare, and write one report.

    python -m training.workflow --config workflows/bundled_task.yaml [--jobs 2]
    python -m training.workflow --config W --print-commands      # the exact command of every run, nothing started
    python -m training.workflow --config W --prepare-only        # build base models (cluster: once, before the array)
    python -m training.workflow --config W --only-run K          # run cell K (1-based) only: one cluster job
    python -m training.workflow --config W --report-only         # compare finished runs and write the report

Each run is one `accelerate launch ... -m training.train --config <run_dir>/recipe.yaml` in its own directory
(`<output_dir>/runs/<name>/`, with `recipe.yaml`, `workflow_run.json`, `train.log`); `evaluate_only` cells run
`python -m training.evaluate --recipe <run_dir>/recipe.yaml --out <run_dir>`. Runs go one after another, or
`--jobs N` at a time, and print progress lines read from their `metrics.jsonl`.

Resumable: a finished run (`run_summary.json` with `global_step` >= `max_steps` or stop reason "completed"; an
evaluation cell with `eval_summary.json`) is skipped; a killed one resumes from its newest checkpoint
(`--resume_from_checkpoint true`), or starts over (`--overwrite_output_dir true`) when it had none; a run a strict
health check stopped (its `run_record.json` says so) is reported failed, never resumed: resuming it would continue
past the check that stopped it (resume it by hand, or delete it, once its cause is dealt with); a run whose
recorded configuration differs from the workflow's is an error, never reused. A failed run is reported with the
tail of its log, and the others go on. Evaluation: every trained run's final held-out evaluation writes its
`eval.jsonl` on the workflow's `heldout_seed`, so all runs are scored on the same paired episodes. Then
`training.compare` on the finished runs (`<output_dir>/comparison/`) and `<output_dir>/report.md`.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import yaml

from training.outputs import run_files
from training.outputs.git_state import git_state
from training.outputs.run_record import ended_on_health_stop, health_stops
from training.errors import bad_input_exits
from training.run_setup.flags import DEFAULTS as STRICT_FLAG_DEFAULTS
from training.run_setup.precision import launch_mixed_precision
from training.sweeps.workflow_spec import Cell, Workflow, WorkflowError, check_recipe_keys, load_workflow

RUN_FILE = run_files.WORKFLOW_RUN
LOG_FILE = "train.log"
RUN_OUTPUTS = (*run_files.TRAINING_OUTPUTS, run_files.EVAL)  # a cell with any of these has run
BASE_MODEL_KEYS = ("model_name_or_path", "model_seed", "warm_start_steps", "warm_start_lr", "warm_start_batch_size",
                   "warm_start_tool_call_rate", "train_file", "environment_factory", "environment_settings",
                   "system_prompt_file",
                   "chat_template_kwargs")
TAIL_LINES = 25


# ---- state of one cell ----------------------------------------------------------------------------------------------
def read_json(path: Path) -> dict | None:
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise WorkflowError(f"{path}: not valid JSON ({err.msg})") from None


def cell_state(cell: Cell) -> str:
    """'finished', 'stopped' (its last attempt ended on a strict health stop), 'resume' (a checkpoint to continue
    from), 'restart' (outputs of a run that never reached a checkpoint) or 'fresh'. Raises when the directory holds a
    run of another configuration."""
    meta = read_json(cell.run_dir / RUN_FILE)
    if meta is not None and meta.get("config_hash") != cell.config_hash:
        raise WorkflowError(
            f"run {cell.name}: {cell.run_dir} holds a run of another configuration (config hash "
            f"{meta.get('config_hash')} != {cell.config_hash}); delete it or give the workflow another output_dir"
        )
    if cell.evaluate_only:
        return "finished" if (cell.run_dir / run_files.EVAL_SUMMARY).exists() else "fresh"
    summary = read_json(cell.run_dir / run_files.RUN_SUMMARY)
    max_steps = cell.recipe.get("max_steps")
    if summary is not None and (
        summary.get("stopped_reason") == "completed"
        or (max_steps is not None and summary.get("global_step", -1) >= max_steps)
    ):
        return "finished"
    if ended_on_health_stop(cell.run_dir):
        return "stopped"
    if any((p / "trainer_state.json").exists() for p in cell.run_dir.glob("checkpoint-*")):
        return "resume"
    if any((cell.run_dir / name).exists() for name in RUN_OUTPUTS):
        return "restart"
    return "fresh"


# ---- commands -------------------------------------------------------------------------------------------------------
def accelerate_executable() -> str:
    beside = Path(sys.executable).with_name("accelerate")
    return str(beside) if beside.exists() else "accelerate"


def threads_per_run(workflow: Workflow, jobs: int) -> int:
    threads = workflow.launcher.get("threads_per_run")
    return int(threads) if threads else max(1, (os.cpu_count() or 1) // max(jobs, 1))


def free_port() -> int:
    """A TCP port nothing listens on now: runs started side by side each get their own torchrun rendezvous port
    (all on accelerate's default 29500, the second fails with EADDRINUSE)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cell_command(workflow: Workflow, cell: Cell, state: str = "fresh", threads: int = 1,
                 port: int | None = None) -> list[str]:
    """The exact command that runs `cell` in the given state (a training run on rendezvous `port`, when given)."""
    recipe = str(cell.run_dir / "recipe.yaml")
    if cell.adapter_dir is not None:  # the run's own model (its base and adapter), evaluated with other settings
        sets = [f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in cell.evaluate_overrides.items()]
        return [sys.executable, "-m", "training.evaluate", str(cell.adapter_dir), "--out", str(cell.run_dir),
                "--overwrite", *(arg for s in sets for arg in ("--set", s))]
    if cell.evaluate_only:
        cmd = [sys.executable, "-m", "training.evaluate", "--recipe", recipe, "--out", str(cell.run_dir), "--overwrite"]
        if cell.baseline is not None:
            cmd += ["--baseline", cell.baseline]
        return cmd
    config = workflow.launcher.get("accelerate_config", "accelerate_configs/cpu.yaml")
    cmd = [
        accelerate_executable(), "launch",
        "--config_file", config,
        "--num_processes", str(workflow.launcher.get("num_processes", 1)),
        "--num_cpu_threads_per_process", str(threads),
        *(["--main_process_port", str(port)] if port is not None else []),
        # the recipe's precision, whatever the accelerate config says (training/run_setup/precision.py)
        "--mixed_precision", launch_mixed_precision(cell.recipe, on_cpu=config_uses_cpu(config)),
        "-m", "training.train", "--config", recipe,
    ]  # fmt: skip
    if state == "resume":
        cmd += ["--resume_from_checkpoint", "true"]
    elif state == "restart":
        cmd += ["--overwrite_output_dir", "true"]
    return cmd


def config_uses_cpu(accelerate_config: str) -> bool:
    """Whether an accelerate config file runs on CPU (`use_cpu: true`), which turns a recipe's `bf16: null` off."""
    path = Path(accelerate_config)
    return path.is_file() and bool((yaml.safe_load(path.read_text()) or {}).get("use_cpu"))


def run_env(workflow: Workflow, threads: int) -> dict:
    env = dict(os.environ)
    for flag, value in STRICT_FLAG_DEFAULTS.items():  # the launchers' defaults too (training/run_setup/flags.py)
        env.setdefault(flag, value)
    env.update(OMP_NUM_THREADS=str(threads), PYTHONUNBUFFERED="1")
    env.setdefault("WANDB_PROJECT", workflow.name)
    return env


def write_cell_files(cell: Cell) -> None:
    """`recipe.yaml` (the resolved recipe) and `workflow_run.json` (what the run is, its launches)."""
    cell.run_dir.mkdir(parents=True, exist_ok=True)
    (cell.run_dir / "recipe.yaml").write_text(yaml.safe_dump(cell.recipe, sort_keys=False))
    meta = read_json(cell.run_dir / RUN_FILE) or {"launches": []}
    meta.update(name=cell.name, group=cell.group, variant=cell.variant, seed=cell.seed, sweep=cell.sweep,
                evaluate_only=cell.evaluate_only, recipe_path=cell.recipe_path, config_hash=cell.config_hash)
    (cell.run_dir / RUN_FILE).write_text(json.dumps(meta, indent=2))


def record_launch(cell: Cell, **fields) -> None:
    meta = read_json(cell.run_dir / RUN_FILE)
    meta["launches"].append(fields)
    (cell.run_dir / RUN_FILE).write_text(json.dumps(meta, indent=2))


def update_last_launch(cell: Cell, **fields) -> None:
    meta = read_json(cell.run_dir / RUN_FILE)
    meta["launches"][-1].update(fields)
    (cell.run_dir / RUN_FILE).write_text(json.dumps(meta, indent=2))


def log_tail(path: Path, lines: int = TAIL_LINES) -> str:
    """What a failed run's log says went wrong: its `error:` line (training's one-line bad-input report) or its
    first Python traceback (launchers add their own after it), then the last lines of the log."""
    if not path.exists():
        return "(no log)"
    text = path.read_text(errors="replace").splitlines()
    errors = [line for line in text if line.startswith("error: ")]
    starts = [i for i, line in enumerate(text) if line.startswith("Traceback (most recent call last)")]
    head = errors[-1:] if errors else text[starts[0] : starts[0] + lines] if starts else []
    tail = text[-(lines if not head else 5):]
    return "\n".join(head + (["..."] if head else []) + tail)


def current_step(cell: Cell) -> int | None:
    path = cell.run_dir / run_files.METRICS
    if not path.exists():
        return None
    lines = [line for line in path.read_text().splitlines() if '"loss"' in line]
    return json.loads(lines[-1])["step"] if lines else 0


# ---- one runner per run: locks and orphans -------------------------------------------------------------------------
class RunLock:
    """An exclusive `flock` on `<run_dir>/.lock`, held by the workflow process while it runs the cell (not inherited
    by the run's processes, so it dies with the workflow). A second workflow on the same run is refused."""

    def __init__(self, cell: Cell):
        self.cell = cell
        self.file = open(cell.run_dir / ".lock", "a+")
        try:
            fcntl.flock(self.file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.file.close()
            raise WorkflowError(f"run {cell.name} is being run by another workflow process ({cell.run_dir}/.lock is "
                                "held); wait for it or stop it") from None
        self.file.seek(0)
        self.file.truncate()
        self.file.write(str(os.getpid()))
        self.file.flush()

    def release(self) -> None:
        fcntl.flock(self.file, fcntl.LOCK_UN)
        self.file.close()


def orphans(cell: Cell) -> list[psutil.Process]:
    """Live processes running this cell's recipe that no workflow holds: left behind by a workflow that was killed
    (torchrun starts its workers in their own session, so killing the workflow's process group misses them)."""
    recipe = (cell.run_dir / "recipe.yaml").resolve()
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            args = proc.info["cmdline"] or []
            if proc.pid == os.getpid() or not any(a.endswith("recipe.yaml") for a in args):
                continue
            cwd = Path(proc.cwd())
            if any((cwd / a).resolve() == recipe for a in args if a.endswith("recipe.yaml")):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def stop_orphans(cell: Cell, say, grace_s: float = 10.0) -> None:
    procs = orphans(cell)
    if not procs:
        return
    say(f"run {cell.name}: stopping {len(procs)} process(es) left by an earlier, killed workflow: "
        f"{', '.join(str(p.pid) for p in procs)}")
    for proc in procs:
        try:
            proc.send_signal(signal.SIGTERM)
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    for proc in alive:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=grace_s)


# ---- running --------------------------------------------------------------------------------------------------------
@dataclass
class Outcome:
    cell: Cell
    status: str                  # finished (earlier), done, failed
    wall_s: float = 0.0
    returncode: int | None = None
    error: str | None = None
    command: list[str] = field(default_factory=list)


class Runner:
    """Starts the cells' commands, `jobs` at a time, and prints progress lines while they run."""

    def __init__(self, workflow: Workflow, jobs: int, progress_every: float = 15.0, out=sys.stdout):
        self.workflow = workflow
        self.jobs = max(1, jobs)
        self.threads = threads_per_run(workflow, self.jobs)
        self.progress_every = progress_every
        self.out = out
        self.total = len(workflow.cells)

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def progress(self, cell: Cell) -> str:
        if cell.evaluate_only:
            return "evaluating"
        step = current_step(cell)
        return "starting" if step is None else f"step {step}/{cell.recipe.get('max_steps', '?')}"

    def prepare(self, cells: list[Cell]) -> None:
        """Build each distinct base model (tiny model, warm start) once, before runs may start in parallel and race
        to write the same cache entry."""
        seen = set()
        for cell in cells:
            if cell.adapter_dir is not None:  # evaluates another run's model: nothing to build
                continue
            key = json.dumps({k: cell.recipe.get(k) for k in BASE_MODEL_KEYS}, sort_keys=True, default=str)
            if key in seen:
                continue
            seen.add(key)
            cmd = [sys.executable, "-m", "training.evaluate", "--recipe", str(cell.run_dir / "recipe.yaml"),
                   "--build_only"]
            self.say(f"prepare: base model of {cell.name}: {' '.join(cmd)}")
            log = cell.run_dir / "prepare.log"
            with open(log, "w") as f:
                code = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=run_env(self.workflow,
                                      os.cpu_count() or 1)).returncode
            if code != 0:
                raise WorkflowError(f"building the base model of {cell.name} failed (exit {code}):\n{log_tail(log)}")

    def run(self, cells: list[Cell]) -> list[Outcome]:
        queue = deque(cells)
        active: dict[int, tuple[Cell, subprocess.Popen, float, list[str]]] = {}
        outcomes: list[Outcome] = []
        last_progress = 0.0
        try:
            while queue or active:
                while queue and len(active) < self.jobs:
                    cell = queue.popleft()
                    stop_orphans(cell, self.say)
                    state = cell_state(cell)
                    if state == "finished":  # a process left by a killed workflow finished it meanwhile
                        self.say(f"run {cell.index}/{self.total}: {cell.describe()} — finished, skipped")
                        outcomes.append(Outcome(cell, "finished"))
                        continue
                    cmd = cell_command(self.workflow, cell, state, self.threads, port=free_port())
                    record_launch(cell, mode=state, command=cmd, started=time.time())
                    self.say(f"run {cell.index}/{self.total}: {cell.describe()} — {state}: {' '.join(cmd)}")
                    log = open(cell.run_dir / LOG_FILE, "a")
                    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                            env=run_env(self.workflow, self.threads))
                    log.close()
                    active[cell.index] = (cell, proc, time.time(), cmd)
                time.sleep(0.5)
                for index, (cell, proc, started, cmd) in list(active.items()):
                    code = proc.poll()
                    if code is None:
                        continue
                    del active[index]
                    wall = time.time() - started
                    update_last_launch(cell, returncode=code, wall_s=wall)
                    if code == 0:
                        outcomes.append(Outcome(cell, "done", wall, code, command=cmd))
                        self.say(f"run {cell.index}/{self.total}: {cell.describe()} — done in {wall:.0f}s")
                    else:
                        tail = log_tail(cell.run_dir / LOG_FILE)
                        outcomes.append(Outcome(cell, "failed", wall, code, tail, cmd))
                        self.say(f"run {cell.index}/{self.total}: {cell.describe()} — FAILED (exit {code}) after "
                                 f"{wall:.0f}s; log tail:\n{tail}")
                if active and time.time() - last_progress >= self.progress_every:
                    last_progress = time.time()
                    for cell, _, _, _ in active.values():
                        self.say(f"run {cell.index}/{self.total}: {cell.describe()} — {self.progress(cell)}")
        finally:
            for cell, proc, _, _ in active.values():  # interrupted: stop the runs this workflow started
                proc.terminate()
                stop_orphans(cell, self.say)
        return outcomes


# ---- CLI ------------------------------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m training.workflow", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="workflow YAML (workflows/*.yaml)")
    parser.add_argument("--jobs", type=int, default=1, help="runs at a time (default 1: one after another)")
    parser.add_argument("--output-dir", help="override the workflow's output_dir")
    parser.add_argument("--print-commands", action="store_true", help="print every run's command and stop")
    parser.add_argument("--prepare-only", action="store_true", help="build the base models and stop")
    parser.add_argument("--only-run", type=int, metavar="K", help="run only cell K (1-based; see --print-commands)")
    parser.add_argument("--report-only", action="store_true", help="compare the finished runs, write the report")
    parser.add_argument("--progress-every", type=float, default=15.0, help="seconds between progress lines")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    workflow = load_workflow(args.config, args.output_dir)
    cells = workflow.cells
    if args.only_run is not None:
        if not 1 <= args.only_run <= len(cells):
            raise WorkflowError(f"--only-run {args.only_run}: the workflow has runs 1..{len(cells)}")
        cells = [cells[args.only_run - 1]]
    runner = Runner(workflow, args.jobs, args.progress_every)
    if args.print_commands:
        check_recipe_keys(workflow)
        for cell in cells:
            print(f"{cell.index}\t{cell.name}\tOMP_NUM_THREADS={runner.threads} "
                  f"{' '.join(cell_command(workflow, cell, 'fresh', runner.threads))}")
        return {"cells": [c.name for c in cells]}
    # First of all (a killed workflow's runs may still be going): take each run's lock, and stop what a killed
    # workflow left running in it, before it can write more.
    locks = {c.index: RunLock(c) for c in cells if c.run_dir.exists()}
    try:
        for cell in cells:
            if cell.run_dir.exists():
                stop_orphans(cell, runner.say)
        check_recipe_keys(workflow)
        for cell in cells:
            cell_state(cell)  # a directory holding another configuration's run stops us before anything runs
            write_cell_files(cell)
            if cell.index not in locks:
                locks[cell.index] = RunLock(cell)
        return _run_phases(workflow, args, cells, runner)
    finally:
        for lock in locks.values():
            lock.release()


def _run_phases(workflow: Workflow, args: argparse.Namespace, cells: list[Cell], runner: Runner) -> dict:
    started, code = time.time(), git_state()
    outcomes: list[Outcome] = []
    if not args.report_only:
        states = {cell.name: cell_state(cell) for cell in cells}
        todo = [c for c in cells if states[c.name] not in ("finished", "stopped")]
        for cell in cells:
            if states[cell.name] == "finished":
                runner.say(f"run {cell.index}/{len(workflow.cells)}: {cell.describe()} — finished earlier, skipped")
                outcomes.append(Outcome(cell, "finished"))
            elif states[cell.name] == "stopped":
                error = (f"stopped by a strict health check ({health_stops(cell.run_dir)[-1]}); not resumed: resume "
                         f"it by hand (--resume_from_checkpoint true) once its cause is dealt with, or delete "
                         f"{cell.run_dir} to start it over")
                runner.say(f"run {cell.index}/{len(workflow.cells)}: {cell.describe()} — failed: {error}")
                outcomes.append(Outcome(cell, "failed", error=error))
        if todo:
            runner.prepare(todo)
        if args.prepare_only:
            return {"prepared": [c.name for c in todo]}
        # cells that evaluate another cell's adapter run once that cell has finished
        later = [c for c in todo if c.adapter_dir is not None]
        outcomes += runner.run([c for c in todo if c.adapter_dir is None])
        # looked up among all the workflow's runs, not only those selected (`--only-run K` of such a cell)
        evaluated = {c.adapter_dir for c in later}
        trained = {c.run_dir for c in workflow.cells if c.run_dir in evaluated and cell_state(c) == "finished"}
        blocked = [c for c in later if c.adapter_dir not in trained]
        for cell in blocked:
            error = f"the run it evaluates ({cell.adapter_dir.name}) did not finish"
            runner.say(f"run {cell.index}/{len(workflow.cells)}: {cell.describe()} — skipped: {error}")
            outcomes.append(Outcome(cell, "failed", error=error))
        outcomes += runner.run([c for c in later if c not in blocked])
        if args.only_run is not None:
            failed = [o.cell.name for o in outcomes if o.status == "failed"]
            return {"outcomes": {o.cell.name: o.status for o in outcomes}, "failed": failed}
    else:
        outcomes = [Outcome(c, "finished" if cell_state(c) == "finished" else "missing") for c in cells]
    from training.sweeps.workflow_report import write_workflow_report

    return write_workflow_report(workflow, args, outcomes, time.time() - started, code)


def cli() -> None:
    with bad_input_exits():
        summary = main()
    if summary.get("failed"):
        sys.exit(1)


if __name__ == "__main__":
    cli()
