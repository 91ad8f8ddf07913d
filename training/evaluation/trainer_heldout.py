"""Held-out evaluation of the trainer's current policy, through the same task entry as `python -m training.evaluate`
(training/evaluation/eval_tasks.py): the task that applies to the trainer's inputs (`inputs_from_trainer`: its
rows, reward functions, weights, environment and sampling) plays the episodes and says which values to log.

`heldout/reward` is sampled as in training (the training temperature, top-p, top-k, min-p and repetition penalty,
each episode from its own seed under `heldout_seed`, so that evaluations before and after, and of different runs, are
paired): the policy's expected reward, what GRPO optimises. `heldout/greedy_reward` is logged beside it; tool runs add
`heldout/malformed_calls`, `heldout/tool_errors` (tools that raised; the model read the error, as in training) and
`heldout/ended_at_limit` (episodes cut at `max_completion_length` or the model's context), the causal task its
regret, parent F1 and information gain. `heldout/nan_count` counts the sampled episodes that could not be scored (a
reward of None or NaN): they are left out of `heldout/reward`, which is not logged at all when no episode could be
scored.

Every evaluation writes its sampled episodes to `output_dir/heldout/step-NNNNNN/eval.jsonl` (+ `eval_summary.json`;
greedy ones to `eval_greedy.jsonl`); `write_final` copies the last one to `output_dir/eval.jsonl`, which
`python -m training.compare` reads (training/evaluation/episodes.py).
"""

from __future__ import annotations

import logging
from pathlib import Path

from training.evaluation.episode_settings import sampling_of
from training.evaluation.episodes import SCORE, Episode, summarize, write_episodes
from training.evaluation.eval_inputs import EvalInputs, inputs_from_trainer
from training.evaluation.heldout_change import MetricChange, changes_between
from training.evaluation.eval_tasks import EvalTask, resolve_task
from training.outputs import run_files
from training.outputs.jsonsafe import dumps_strict
from training.outputs.run_files import heldout_step_dir
from training.step.distributed import full_weights_for_generation

logger = logging.getLogger(__name__)

GREEDY_FILE = run_files.EVAL_GREEDY


class HeldoutEvaluation:
    """Scores `rows` (read from `split`, when known) with the trainer's policy; `history` keeps every evaluation with
    its optimizer step."""

    def __init__(self, trainer, rows: list[dict], split: str | None = None):
        self.trainer = trainer
        self.rows = rows
        self.split = split
        self.history: list[dict] = []
        self.last: dict | None = None  # the latest evaluation's episodes and settings, for `write_final`
        self._task: EvalTask | None = None

    @property
    def seed(self) -> int:
        """The evaluation seed: `heldout_seed` (a plain `GRPOConfig` carried over has none: its default, 0)."""
        return getattr(self.trainer.args, "heldout_seed", 0)

    def inputs(self) -> EvalInputs:
        return inputs_from_trainer(self.trainer, self.rows, self.seed, self.split)

    @property
    def task(self) -> EvalTask:
        """The evaluation task that applies to the trainer's inputs (the causal task for a `CausalEnv`)."""
        if self._task is None:
            inputs = self.inputs()
            self._task = resolve_task(inputs.environment_factory, inputs.source)
        return self._task

    def evaluate(self) -> dict[str, float]:
        trainer = self.trainer
        inputs, task = self.inputs(), self.task
        model = trainer.accelerator.unwrap_model(trainer.model)
        policy = (model, trainer.processing_class)
        with full_weights_for_generation(model, trainer.accelerator):
            sampled = task.evaluate(inputs, policy)
            greedy = task.evaluate(inputs.greedy(), policy)
        self._warn_unscorable(sampled[0])
        if sampled[0] or greedy[0]:
            self._write(sampled[0], greedy[0])
        return task.heldout_values(sampled, greedy)

    def record(self) -> dict[str, float]:
        """Evaluate now; the values join the history and the trainer's next log."""
        values = self.evaluate()
        self.history.append({"step": self.trainer.state.global_step, **values})
        for name, value in values.items():
            self.trainer._metrics["train"][name].append(value)
        return values

    @property
    def metric_directions(self) -> dict[str, str]:
        """The task's episode metrics besides the score, reported as the reward (none for the generic tasks)."""
        return {name: better for name, better in self.task.metric_directions.items() if name != SCORE}

    def change_since_start(self) -> list[MetricChange]:
        """The paired change of every held-out metric, the greedy reward's among them, from the step-0 evaluation to
        the one at the current step (training.evaluation.heldout_change); empty before any step, or when either
        evaluation left no files (the main process alone writes them)."""
        step = self.trainer.state.global_step
        if step == 0:
            return []
        out = self.trainer.args.output_dir
        return changes_between(heldout_step_dir(out, 0), heldout_step_dir(out, step), self.metric_directions)

    def _warn_unscorable(self, episodes: list[Episode]) -> None:
        bad = [e for e in episodes if e.score is None]
        if bad:
            logger.warning(
                "Held-out evaluation at step %d: %d of %d sampled episodes unscorable and left out of heldout/reward "
                "(first: episode %s, %s)",
                self.trainer.state.global_step, len(bad), len(episodes), bad[0].id, bad[0].unscorable_reason,
            )

    # ---- per-episode files ------------------------------------------------------------------------------------------
    def _meta(self) -> dict:
        trainer = self.trainer
        return {
            "source": "training held-out evaluation",
            "step": trainer.state.global_step,
            "heldout_seed": self.seed,
            "samples_per_prompt": trainer.args.heldout_samples_per_prompt,
            "max_rows": trainer.args.heldout_max_samples,
            "sampling": sampling_of(trainer),
            "max_new_tokens": trainer.max_completion_length,
            "task": self.task.name,
            "metric_directions": {SCORE: "higher", **self.metric_directions},
        }

    def _write(self, sampled: list[Episode], greedy: list[Episode]) -> None:
        meta = self._meta()
        greedy_summary = summarize(greedy).as_json() if greedy else None
        self.last = {"sampled": sampled, "greedy": greedy, "meta": {**meta, "greedy": greedy_summary}}
        if not self.trainer.accelerator.is_main_process:
            return
        self._write_into(heldout_step_dir(self.trainer.args.output_dir, meta["step"]))

    def _write_into(self, out_dir: Path) -> None:
        write_episodes(out_dir, self.last["sampled"], self.last["meta"])
        with open(out_dir / GREEDY_FILE, "w") as f:
            for episode in self.last["greedy"]:
                f.write(dumps_strict(episode.as_json()) + "\n")

    def write_final(self, output_dir: str | Path | None = None) -> Path | None:
        """Copy the latest evaluation's episodes to `output_dir/eval.jsonl` (+ summary, greedy file); main process
        only. Returns the path written, or None when there was nothing to write."""
        if not self.trainer.accelerator.is_main_process:
            return None
        out_dir = Path(output_dir or self.trainer.args.output_dir)
        if self.last is None:
            return None
        self._write_into(out_dir)
        return out_dir / run_files.EVAL
