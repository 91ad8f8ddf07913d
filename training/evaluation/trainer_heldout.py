"""Held-out evaluation of the trainer's current policy: reward functions on held-out prompts, or goal success of
episodes in the environment for tool agents.

`heldout/reward` is sampled as in training (the training temperature, top-p and top-k, each episode from its own
seed under `heldout_seed`, so that evaluations before and after, and of different runs, are paired): the policy's
expected reward, what GRPO optimises. `heldout/greedy_reward` is logged beside it; tool runs add
`heldout/malformed_calls` and `heldout/tool_errors` (tools that raised; the model read the error, as in training).
`heldout/nan_count` counts the sampled episodes that could not be scored (a reward of None or NaN): they are left
out of `heldout/reward`, which is not logged at all when no episode could be scored.

Every evaluation writes its sampled episodes to `output_dir/heldout/step-NNNNNN/eval.jsonl` (+ `eval_summary.json`;
greedy ones to `eval_greedy.jsonl`); `write_final` copies the last one to `output_dir/eval.jsonl`, which
`python -m training.compare` reads (training/evaluation/episodes.py). An environment a task recognises is evaluated by
that task's own evaluator instead (`training.run_setup.task_plugins.TrainingEvaluator`; the causal task's: regret,
parent F1 and information gain beside the reward, in each episode's `metrics`), into the same files.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

from training.evaluation.episode_settings import EpisodeSettings
from training.evaluation.episodes import EVAL_FILE, SCORE, Episode, read_episodes, summarize, write_episodes
from training.evaluation.heldout_change import MetricChange, changes, row_means
from training.evaluation.heldout_reward import heldout_episodes
from training.evaluation.tool_episodes import TOOL_ERROR, environment_success
from training.outputs import run_files
from training.outputs.jsonsafe import dumps_strict
from training.run_setup.task_plugins import TrainingEvaluator, training_evaluator
from training.step.distributed import full_weights_for_generation

logger = logging.getLogger(__name__)

GREEDY_FILE = run_files.EVAL_GREEDY


def step_dir(output_dir: str | Path, step: int) -> Path:
    """Where the evaluation at optimizer step `step` writes its episodes."""
    return Path(output_dir) / "heldout" / f"step-{step:06d}"


def _mean_or_skip(values: dict, name: str, mean: float | None) -> None:
    if mean is not None and math.isfinite(mean):
        values[name] = mean


class HeldoutEvaluation:
    """Scores `rows` with the trainer's policy; `history` keeps every evaluation with its optimizer step."""

    def __init__(self, trainer, rows: list[dict]):
        self.trainer = trainer
        self.rows = rows
        self.history: list[dict] = []
        self.last: dict | None = None  # the latest evaluation's episodes and settings, for `write_final`
        self._task_evaluator: TrainingEvaluator | None | bool = False  # False: not looked up yet

    @property
    def task_evaluator(self) -> TrainingEvaluator | None:
        """The task's own evaluator when one recognises the trainer's environment (the causal task's)."""
        if self._task_evaluator is False:
            self._task_evaluator = (None if self.trainer.environment_factories is None
                                    else training_evaluator(self.trainer))
        return self._task_evaluator

    @property
    def seed(self) -> int:
        """The evaluation seed: `heldout_seed` (a plain `GRPOConfig` carried over has none: its default, 0)."""
        return getattr(self.trainer.args, "heldout_seed", 0)

    def evaluate(self) -> dict[str, float]:
        trainer = self.trainer
        if trainer.environment_factories is None:
            values, sampled, greedy = self._reward_functions()
        elif self.task_evaluator is not None:
            values, sampled, greedy = self.task_evaluator.evaluate(trainer, self.rows, self.seed)
        else:
            values, sampled, greedy = self._environment_success()
        if sampled or greedy:
            self._write(sampled, greedy)
        return values

    def _reward_functions(self) -> tuple[dict[str, float], list[Episode], list[Episode]]:
        trainer = self.trainer
        rows = self.rows[: trainer.args.heldout_max_samples]
        model = trainer.accelerator.unwrap_model(trainer.model)
        settings = EpisodeSettings.from_trainer(trainer, self.seed)
        tokenizer, funcs, weights = trainer.processing_class, trainer.reward_funcs, trainer.reward_weights.tolist()
        with full_weights_for_generation(model, trainer.accelerator):
            sampled = heldout_episodes(model, tokenizer, rows, funcs, settings, reward_weights=weights)
            greedy = heldout_episodes(model, tokenizer, rows, funcs, settings.greedy(), reward_weights=weights)
        values: dict[str, float] = {}
        _mean_or_skip(values, "heldout/reward", summarize(sampled).mean)
        _mean_or_skip(values, "heldout/greedy_reward", summarize(greedy).mean)
        values["heldout/nan_count"] = float(summarize(sampled).nan_count)
        self._warn_unscorable(sampled)
        return values, sampled, greedy

    def record(self) -> dict[str, float]:
        """Evaluate now; the values join the history and the trainer's next log."""
        values = self.evaluate()
        self.history.append({"step": self.trainer.state.global_step, **values})
        for name, value in values.items():
            self.trainer._metrics["train"][name].append(value)
        return values

    def _environment_success(self) -> tuple[dict[str, float], list[Episode], list[Episode]]:
        """Goal success of sampled and greedy episodes, and the malformed tool calls of both (counted as in
        training)."""
        trainer = self.trainer
        if trainer._multi_environment:
            raise NotImplementedError("held-out evaluation supports a single environment_factory, not a dict")
        model, tokenizer = trainer.accelerator.unwrap_model(trainer.model), trainer.processing_class
        rows, factory = self.rows[: trainer.args.heldout_max_samples], trainer.environment_factories[None]
        settings = EpisodeSettings.from_trainer(trainer, self.seed)
        sampled_episodes: list[Episode] = []
        greedy_episodes: list[Episode] = []
        with full_weights_for_generation(model, trainer.accelerator):  # as the other held-out evaluations
            sampled, counts = environment_success(model, tokenizer, rows, factory, settings, episodes=sampled_episodes)
            greedy, greedy_counts = environment_success(model, tokenizer, rows, factory, settings.greedy(),
                                                        episodes=greedy_episodes)
        both = counts + greedy_counts
        tool_errors = float(both.pop(TOOL_ERROR, 0))
        values: dict[str, float] = {}
        _mean_or_skip(values, "heldout/reward", sampled)
        _mean_or_skip(values, "heldout/greedy_reward", greedy)
        values["heldout/malformed_calls"] = float(sum(both.values()))
        if sampled_episodes or greedy_episodes:  # episode-level counts, known when the episodes came back
            values["heldout/tool_errors"] = tool_errors
            values["heldout/nan_count"] = float(summarize(sampled_episodes).nan_count)
            self._warn_unscorable(sampled_episodes)
        return values, sampled_episodes, greedy_episodes

    def row_metrics(self, step: int) -> tuple[dict[str, dict[int, float]], dict[str, str]] | None:
        """Per held-out row, the metrics of the evaluation at optimizer step `step` averaged over its sampled
        episodes (read from its files), with which way each is better; None when that evaluation left no files."""
        directory = step_dir(self.trainer.args.output_dir, step)
        if not (directory / EVAL_FILE).exists():
            return None
        episodes = read_episodes(directory)
        directions = {**self.metric_directions, "reward": "higher"}  # the task's own first, as the docs show them
        metrics = {name: row_means((e.row, e.score if name == "reward" else e.value(name)) for e in episodes)
                   for name in directions}
        return metrics, directions

    @property
    def metric_directions(self) -> dict[str, str]:
        """The task's episode metrics besides the reward (none for the generic evaluations)."""
        return {} if self.task_evaluator is None else dict(self.task_evaluator.metric_directions)

    def change_since_start(self) -> list[MetricChange]:
        """The paired change of every held-out metric from the step-0 evaluation to the one at the current step
        (training.evaluation.heldout_change); empty before any step, or when either evaluation left no files (main process
        only writes them)."""
        step = self.trainer.state.global_step
        start, final = (self.row_metrics(0), self.row_metrics(step)) if step > 0 else (None, None)
        if start is None or final is None:
            return []
        return changes(start[0], final[0], final[1])

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
            "eval_seed": self.seed,
            "samples_per_prompt": trainer.args.heldout_samples_per_prompt,
            "max_rows": trainer.args.heldout_max_samples,
            "sampling": {"temperature": trainer.temperature, "top_p": trainer.top_p, "top_k": trainer.top_k},
            "max_new_tokens": trainer.max_completion_length,
            "task": None if self.task_evaluator is None else self.task_evaluator.name,
            "metric_directions": {SCORE: "higher", **self.metric_directions},
        }

    def _write(self, sampled: list[Episode], greedy: list[Episode]) -> None:
        meta = self._meta()
        greedy_summary = summarize(greedy).as_json() if greedy else None
        self.last = {"sampled": sampled, "greedy": greedy, "meta": {**meta, "greedy": greedy_summary}}
        if not self.trainer.accelerator.is_main_process:
            return
        self._write_into(step_dir(self.trainer.args.output_dir, meta["step"]))

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
