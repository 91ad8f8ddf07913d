"""`python -m training.workflow`: a YAML grid expands to named runs with resolved recipes; finished runs are skipped,
killed ones resumed, failed ones reported; killed and restarted, a workflow finishes without redoing finished runs."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from training.sweeps.workflow_spec import WorkflowError, load_workflow
from training.workflow import cell_command, cell_state, main, write_cell_files

REPO = Path(__file__).resolve().parents[2]


def write_workflow(tmp_path: Path, **spec) -> Path:
    base = {"name": "t", "output_dir": str(tmp_path / "wf"), "recipe": "recipes/tiny_cpu.yaml", "seeds": [0, 1]}
    path = tmp_path / "wf.yaml"
    path.write_text(yaml.safe_dump({**base, **spec}, sort_keys=False))
    return path


def test_grid_variants_and_seeds_expand_to_named_runs_with_resolved_recipes(tmp_path):
    path = write_workflow(
        tmp_path, heldout_seed=7, overrides={"max_steps": 3}, grid={"learning_rate": [1e-3, 3e-3], "lora_r": [8]},
        variants={"all": {}, "no_format": {"overrides": {"reward_weights": [1.0, 0.0]}},
                  "base": {"evaluate_only": True}},
        compare={"baseline": "base"},
    )
    wf = load_workflow(path)
    names = [c.name for c in wf.cells]
    assert names == ["all_learning_rate=0.001_lora_r=8-seed0", "all_learning_rate=0.001_lora_r=8-seed1",
                     "all_learning_rate=0.003_lora_r=8-seed0", "all_learning_rate=0.003_lora_r=8-seed1",
                     "no_format_learning_rate=0.001_lora_r=8-seed0", "no_format_learning_rate=0.001_lora_r=8-seed1",
                     "no_format_learning_rate=0.003_lora_r=8-seed0", "no_format_learning_rate=0.003_lora_r=8-seed1",
                     "base-seed0"]
    ablated = wf.cells[5].recipe
    assert ablated["reward_weights"] == [1.0, 0.0] and ablated["learning_rate"] == 1e-3 and ablated["lora_r"] == 8
    assert (ablated["seed"], ablated["heldout_seed"], ablated["max_steps"]) == (1, 7, 3)
    assert ablated["run_name"] == wf.cells[5].name and ablated["tracking_group"] == wf.cells[5].group
    assert ablated["output_dir"] == str(tmp_path / "wf" / "runs" / wf.cells[5].name) and ablated["project"] == "t"
    assert wf.cells[0].recipe["reward_weights"] == [0.5, 0.5]  # the recipe's own value where nothing overrides it
    assert wf.cells[-1].evaluate_only and "learning_rate" not in wf.cells[-1].sweep


@pytest.mark.parametrize(("spec", "message"), [
    ({"overides": {}}, r"unknown key overides \(did you mean overrides\?\)"),
    ({"overrides": {"seed": 3}}, r"overrides sets \['seed'\], which the workflow sets"),
    ({"grid": {"learning_rate": 1e-3}}, "grid must map recipe keys to non-empty lists"),
    ({"variants": {"a": {"evaluate_ony": True}}}, r"unknown key variants.a.evaluate_ony"),
    ({"compare": {"baseline": "nope"}}, r"compare.baseline 'nope' is not a group of this workflow \(\['default'\]\)"),
    ({"seeds": []}, "seeds must be a non-empty list of integers"),
    ({"variants": {"a": {}, "b": {"baseline": "random"}}}, r"variants.b.baseline needs evaluate_only: true"),
    ({"variants": {"a": {"evaluate_only": True}, "b": {"evaluate_only": True, "adapter_of": "a"}}},
     r"variants.b.adapter_of: 'a' is not a trained variant of this workflow \(\[\]\)"),
    ({"variants": {"a": {}, "b": {"evaluate_only": True, "adapter_of": "a", "baseline": "random"}}},
     "give baseline or adapter_of, not both"),
    ({"grid": {"lora_r": [8, 16]}, "variants": {"a": {}, "b": {"evaluate_only": True, "adapter_of": "a"}}},
     "a swept workflow has several runs per seed"),
    ({"seed_keys": ["seed"]}, r"seed_keys sets \['seed'\], which the workflow sets itself"),
])
def test_a_bad_workflow_is_refused_naming_file_and_field(tmp_path, spec, message):
    path = write_workflow(tmp_path, **spec)
    with pytest.raises(WorkflowError, match=message) as err:
        load_workflow(path)
    assert str(path) in str(err.value)


def test_an_unknown_recipe_key_is_named_before_anything_runs(tmp_path):
    path = write_workflow(tmp_path, variants={"a": {"overrides": {"learning_rat": 0.1}}})
    with pytest.raises(WorkflowError, match=r"run a-seed0: unknown recipe key 'learning_rat' \(did you mean"):
        main(["--config", str(path)])
    assert not (tmp_path / "wf").exists()


def test_state_decides_skip_resume_or_restart_and_the_command_follows(tmp_path):
    wf = load_workflow(write_workflow(tmp_path, overrides={"max_steps": 4}))
    cell = wf.cells[0]
    assert cell_state(cell) == "fresh"
    write_cell_files(cell)
    (cell.run_dir / "metrics.jsonl").write_text('{"step": 1, "loss": 0.1}\n')
    assert cell_state(cell) == "restart"
    assert cell_command(wf, cell, "restart")[-2:] == ["--overwrite_output_dir", "true"]
    (cell.run_dir / "checkpoint-2").mkdir()
    (cell.run_dir / "checkpoint-2" / "trainer_state.json").write_text("{}")
    assert cell_state(cell) == "resume"
    assert cell_command(wf, cell, "resume")[-2:] == ["--resume_from_checkpoint", "true"]
    cmd = cell_command(wf, cell, "fresh", threads=3)
    assert cmd[1:3] == ["launch", "--config_file"] and "--num_cpu_threads_per_process" in cmd
    assert cmd[cmd.index("--config") + 1] == str(cell.run_dir / "recipe.yaml")
    # runs side by side each get their own rendezvous port (two on accelerate's default 29500: EADDRINUSE)
    ported = cell_command(wf, cell, "fresh", port=31234)
    assert ported[ported.index("--main_process_port") + 1] == "31234" and "--main_process_port" not in cmd
    assert yaml.safe_load((cell.run_dir / "recipe.yaml").read_text()) == cell.recipe
    (cell.run_dir / "run_summary.json").write_text(json.dumps({"global_step": 3, "stopped_reason": "max_wall_time"}))
    assert cell_state(cell) == "resume"  # stopped by the wall-time guard before max_steps: continue it
    (cell.run_dir / "run_summary.json").write_text(json.dumps({"global_step": 4, "stopped_reason": "max_wall_time"}))
    assert cell_state(cell) == "finished"
    changed = load_workflow(write_workflow(tmp_path, overrides={"max_steps": 5})).cells[0]
    with pytest.raises(WorkflowError, match="holds a run of another configuration"):
        cell_state(changed)


def test_a_run_a_health_check_stopped_is_reported_failed_and_never_resumed(tmp_path):
    wf = load_workflow(write_workflow(tmp_path, seeds=[0], overrides={"max_steps": 4}))
    cell = wf.cells[0]
    write_cell_files(cell)
    (cell.run_dir / "checkpoint-3").mkdir()
    (cell.run_dir / "checkpoint-3" / "trainer_state.json").write_text("{}")
    stop = "health/grad_spike fired for 3 consecutive steps (up to step 3)"
    attempts = [{"attempt": 1, "last_step": 3, "ended": f"error: RunHealthError: {stop}"}]
    (cell.run_dir / "run_record.json").write_text(json.dumps({"attempts": attempts}))
    assert cell_state(cell) == "stopped"  # a checkpoint is there, but resuming would go on past the check
    summary = main(["--config", str(wf.path)])
    assert summary["failed"] == [cell.name]
    row = summary["runs"][0]
    assert "stopped by a strict health check (step 3: health/grad_spike" in row["error"] and "not resumed" in row["error"]
    assert row["health_stops"] == [f"step 3: {stop}"] and row["launches"] == 0
    # resumed by hand and finished: the workflow takes it, and its report still names the stop
    attempts.append({"attempt": 2, "last_step": 4, "ended": "completed"})
    (cell.run_dir / "run_record.json").write_text(json.dumps({"attempts": attempts}))
    (cell.run_dir / "run_summary.json").write_text(json.dumps({"global_step": 4, "stopped_reason": "completed"}))
    assert cell_state(cell) == "finished"
    summary = main(["--config", str(wf.path), "--report-only"])
    assert summary["runs"][0]["health_stops"] == [f"step 3: {stop}"]
    assert f"{cell.name} was stopped by a strict health check in an earlier attempt" in (
        (tmp_path / "wf" / "report.md").read_text())
    # another error (a bug, a lost machine) does not stop a resume
    attempts[-1] = {"attempt": 2, "last_step": 3, "ended": "error: RuntimeError: boom"}
    (cell.run_dir / "run_record.json").write_text(json.dumps({"attempts": attempts}))
    (cell.run_dir / "run_summary.json").unlink()
    assert cell_state(cell) == "resume"


TINY = {"warm_start_steps": 0, "max_steps": 2, "save_steps": 1, "per_device_train_batch_size": 8,
        "num_generations": 4, "heldout_max_samples": 4, "heldout_eval_steps": 1, "strict_health": False,
        "reward_funcs": ["tests.support.tiny_trainer.length_reward"], "reward_weights": [1.0]}


@pytest.mark.slow
def test_a_killed_workflow_restarts_without_redoing_finished_runs_and_reports_failures(tmp_path):
    path = write_workflow(tmp_path, overrides=TINY, variants={
        "grpo": {}, "broken": {"seeds": [0], "overrides": {"reward_funcs": ["training.tasks.larger_number.rewards.no_such_reward"]}},
        "base": {"evaluate_only": True}}, compare={"baseline": "base"})
    out = tmp_path / "wf" / "runs"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "training.workflow", "--config", str(path), "--progress-every",
                             "1"], cwd=REPO, env=env, start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 400
    while not (out / "grpo-seed0" / "run_summary.json").exists():
        assert proc.poll() is None, proc.stdout.read()[-3000:]
        assert time.time() < deadline
        time.sleep(0.2)
    while not (out / "grpo-seed1" / "checkpoint-1" / "trainer_state.json").exists():  # the second run is under way
        assert proc.poll() is None, proc.stdout.read()[-3000:]
        assert time.time() < deadline
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)  # the workflow and the run it started
    proc.wait()
    finished_mtime = (out / "grpo-seed0" / "run_summary.json").stat().st_mtime
    assert not (out / "grpo-seed1" / "run_summary.json").exists()

    restart = subprocess.run([sys.executable, "-m", "training.workflow", "--config", str(path)], cwd=REPO, env=env,
                             capture_output=True, text=True, timeout=600)
    assert restart.returncode == 1, restart.stdout[-3000:] + restart.stderr[-3000:]  # one run failed
    assert "grpo seed 0 — finished earlier, skipped" in restart.stdout
    assert (out / "grpo-seed0" / "run_summary.json").stat().st_mtime == finished_mtime

    def launches(name):
        return json.loads((out / name / "workflow_run.json").read_text())["launches"]

    assert len(launches("grpo-seed0")) == 1
    # torchrun's worker outlives the killed process group; the restart stops it first, then resumes the run
    assert "left by an earlier, killed workflow" in restart.stdout
    assert [launch["mode"] for launch in launches("grpo-seed1")] == ["fresh", "resume"]
    assert json.loads((out / "grpo-seed1" / "run_summary.json").read_text())["global_step"] == 2
    steps = [json.loads(line)["step"] for line in (out / "grpo-seed1" / "metrics.jsonl").read_text().splitlines()
             if '"loss"' in line]
    assert steps == [1, 2]
    summary = json.loads((tmp_path / "wf" / "workflow_summary.json").read_text())
    assert summary["failed"] == ["broken-seed0"]
    broken = next(r for r in summary["runs"] if r["name"] == "broken-seed0")
    assert "no_such_reward" in broken["error"]
    assert {m["name"] for m in summary["comparison"]["models"]} == {"grpo", "base"}
    report = (tmp_path / "wf" / "report.md").read_text()
    assert "## Verdict" in report and "grpo" in report and "### broken-seed0 failed" in report


@pytest.mark.parametrize("name", ["bundled_task", "lr_sweep"])
def test_shipped_workflows_expand_to_runs_training_accepts(name):
    from training.sweeps.workflow_spec import check_recipe_keys

    wf = load_workflow(REPO / "workflows" / f"{name}.yaml")
    check_recipe_keys(wf)
    assert len({c.recipe["heldout_seed"] for c in wf.cells}) == 1  # every run on the same paired episodes
    assert wf.compare["baseline"] in {c.group for c in wf.cells}
    if name == "bundled_task":
        assert sorted({c.group for c in wf.cells}) == ["grpo", "plain_trl", "warm_start"]
        assert [c.seed for c in wf.cells if c.group == "grpo"] == [0, 1, 2]
        assert {c.recipe.get("trainer", "strict") for c in wf.cells if c.group == "plain_trl"} == {"trl"}


def test_baselines_evaluations_of_trained_runs_and_seed_keys_expand_to_their_commands(tmp_path):
    """`baseline` evaluates a scripted policy, `adapter_of` a trained variant's run of the same seed (its own model,
    with the variant's overrides as evaluation settings), `seed_keys` sets recipe keys to each run's seed."""
    path = write_workflow(tmp_path, seed_keys=["model_seed"], variants={
        "trained": {}, "random": {"evaluate_only": True, "baseline": "random"},
        "again": {"evaluate_only": True, "adapter_of": "trained", "overrides": {"heldout_max_samples": 5}}})
    wf = load_workflow(path)
    cells = {c.name: c for c in wf.cells}
    assert list(cells) == ["trained-seed0", "trained-seed1", "random-seed0", "again-seed0", "again-seed1"]
    assert [cells[f"trained-seed{s}"].recipe["model_seed"] for s in (0, 1)] == [0, 1]
    assert cell_command(wf, cells["random-seed0"])[-2:] == ["--baseline", "random"]
    again = cell_command(wf, cells["again-seed1"])
    assert again[3] == str(cells["trained-seed1"].run_dir)  # the run's own model, not the recipe's
    assert again[-2:] == ["--set", "heldout_max_samples=5"] and "--recipe" not in again
    assert cells["again-seed0"].config_hash != cells["again-seed1"].config_hash


def test_each_run_is_launched_with_its_recipes_precision(tmp_path):
    """The workflow launches `accelerate launch` itself: like the launchers, it passes the recipe's precision, not
    the accelerate config's (training/run_setup/precision.py)."""
    wf = load_workflow(write_workflow(tmp_path, variants={"fp32": {"overrides": {"bf16": False}},
                                                          "bf16": {"overrides": {"bf16": True}}}))
    precision = {cell.variant: (cmd := cell_command(wf, cell))[cmd.index("--mixed_precision") + 1] for cell in wf.cells}
    assert precision == {"fp32": "no", "bf16": "bf16"}


def test_only_run_of_an_evaluation_takes_the_finished_run_it_evaluates(tmp_path):
    wf = load_workflow(write_workflow(tmp_path, seeds=[0], overrides={"max_steps": 4}, variants={
        "trained": {}, "again": {"evaluate_only": True, "adapter_of": "trained"}}))
    trained, again = wf.cells
    write_cell_files(trained)
    summary = main(["--config", str(wf.path), "--only-run", str(again.index)])
    assert summary["failed"] == [again.name]  # the trained run has not run yet
    assert not (again.run_dir / "workflow_run.json").exists() or not json.loads(
        (again.run_dir / "workflow_run.json").read_text()).get("launches")
    (trained.run_dir / "run_summary.json").write_text(json.dumps({"global_step": 4, "stopped_reason": "completed"}))
    assert cell_state(trained) == "finished"
    main(["--config", str(wf.path), "--only-run", str(again.index)])  # its evaluation launches (and fails: no model)
    launches = json.loads((again.run_dir / "workflow_run.json").read_text())["launches"]
    assert len(launches) == 1 and launches[0]["command"][3] == str(trained.run_dir)
