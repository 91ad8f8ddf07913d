"""The file names of a run directory, in one place: every module that reads or writes one takes its name from here."""

from pathlib import Path

METRICS = "metrics.jsonl"  # one line per logged step (training.step.callbacks)
RUN_SUMMARY = "run_summary.json"  # the run's end (training.outputs.run_summary)
REWARD_CURVE = "reward_curve.png"
RUN_RECORD = "run_record.json"  # every attempt, its recipe and held-out history (training.outputs.run_record)
ADAPTER = "adapter_model.safetensors"
EVAL = "eval.jsonl"  # held-out episodes (training.evaluation.episodes)
EVAL_SUMMARY = "eval_summary.json"
EVAL_GREEDY = "eval_greedy.jsonl"
HELDOUT = "heldout"  # heldout/step-NNNNNN/: the held-out evaluation at that optimizer step (`heldout_step_dir`)
FEATURE_STATE = "strict_features.json"  # in each checkpoint: the step features' state (training.trainer)
WORKFLOW_RUN = "workflow_run.json"  # a workflow cell's command and status (training.workflow)
COMPARISON = "comparison.md"  # training.compare's report

# What an earlier training run leaves in its output_dir: any of these means the directory is taken.
TRAINING_OUTPUTS = (METRICS, RUN_SUMMARY, REWARD_CURVE, ADAPTER)


def heldout_step_dir(output_dir: str | Path, step: int) -> Path:
    """Where a run's held-out evaluation at optimizer step `step` writes its episodes."""
    return Path(output_dir) / HELDOUT / f"step-{step:06d}"
