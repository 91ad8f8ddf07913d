"""What one held-out evaluation plays, as one object: the rows, how the episodes are played, the reward functions
and weights that score them, and the environment they are played in.

Built from an evaluation spec (`python -m training.evaluate`: the recipe's or the run's settings, the rows read and
set up as training sets them up) or from the trainer (the held-out evaluation during training: its own reward
functions, weights, environment and sampling). Every task's evaluator (`training.evaluation.eval_tasks.EvalTask`)
takes it, so the two paths play the same episodes through the same code.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from training.evaluation.episode_settings import EpisodeSettings


@dataclass(frozen=True)
class EvalInputs:
    source: str                              # where the inputs came from (a recipe, a run, "trainer"), for messages
    rows: list[dict]
    settings: EpisodeSettings
    reward_funcs: list = field(default_factory=list)
    reward_names: list[str] = field(default_factory=list)
    reward_weights: list[float] | None = None  # None: every reward function weighs 1
    environment_factory: object | None = None
    split: str | None = None                 # the file the rows came from, stamped into records that keep it
    progress: str | None = "episodes"        # the label of the bar of episodes done (progress.py); None: no bar

    def greedy(self) -> EvalInputs:
        label = None if self.progress is None else f"{self.progress}, greedy"
        return replace(self, settings=self.settings.greedy(), progress=label)

    def weights_by_name(self) -> dict[str, float]:
        weights = self.reward_weights or [1.0] * len(self.reward_names)
        return dict(zip(self.reward_names, weights, strict=True))


def inputs_from_spec(spec, rows: list[dict] | None = None, split: str | None = None) -> EvalInputs:
    """The inputs of an evaluation spec (training/evaluation/spec.py): its held-out rows (the first `max_rows`; or
    `rows`, read from `split`, as a task's options chose them), its reward functions imported by name, its
    environment set up and its rows checked as training does it."""
    from training.evaluation.heldout_reward import reward_name
    from training.evaluation.spec import EvalSpecError
    from training.run_setup.prompt_datasets import load_rows
    from training.run_setup.recipe import import_reward

    if rows is None:
        if not spec.heldout_file:
            raise EvalSpecError(f"{spec.source}: no heldout_file to evaluate on")
        rows, split = load_rows(spec.heldout_file)[: spec.max_rows], spec.heldout_file
    funcs = [import_reward(name) for name in spec.reward_funcs]
    factory = None
    if spec.environment_factory:
        factory, rows = _environment_rows(spec, rows, split)
    return EvalInputs(
        source=str(spec.source), rows=rows, settings=EpisodeSettings.from_spec(spec), reward_funcs=funcs,
        reward_names=[reward_name(f) for f in funcs], reward_weights=spec.reward_weights,
        environment_factory=factory, split=split,
    )


def spec_environment(spec):
    """The environment the spec names, configured by its settings (None without one): what tells tasks apart."""
    from training.run_setup.recipe import environment_class

    return environment_class(spec.environment_factory, spec.environment_settings) if spec.environment_factory else None


def _environment_rows(spec, rows: list[dict], split: str) -> tuple[object, list[dict]]:
    """The recipe's environment factory and the rows, set up as training sets them up (the system prompt in front,
    tool names checked, each row checked by the environment)."""
    from types import SimpleNamespace

    from training.run_setup.input_checks import check_environment_rows
    from training.run_setup.recipe import setup_environment

    script = SimpleNamespace(
        environment_factory=spec.environment_factory, environment_settings=spec.environment_settings,
        system_prompt_file=spec.system_prompt_file,
        tool_names=spec.tool_names, train_file=split, heldout_file=None,
    )
    factory, rows, _ = setup_environment(script, rows, [])
    check_environment_rows(factory, {split: rows})
    return factory, rows


def _weights(trainer) -> list[float]:
    """The run's reward weights as the recipe gives them (TRL keeps them as a float32 tensor, whose 0.3 is
    0.30000001192...: the scores would differ from an evaluation of the same episodes from the recipe)."""
    given = getattr(trainer.args, "reward_weights", None)
    return [float(w) for w in given] if given is not None else trainer.reward_weights.tolist()


def inputs_from_trainer(trainer, rows: list[dict], seed: int, split: str | None = None) -> EvalInputs:
    """The inputs of the trainer's held-out evaluation: the first `heldout_max_samples` rows, sampled as the trainer
    samples (`EpisodeSettings.from_trainer`), scored by its own reward functions and weights, in its environment."""
    shown = trainer.accelerator.is_main_process and not trainer.args.disable_tqdm
    factories = getattr(trainer, "environment_factories", None)
    factory = None
    if factories:
        if getattr(trainer, "_multi_environment", False) or None not in factories:
            raise NotImplementedError("held-out evaluation supports a single environment_factory, not a dict")
        factory = factories[None]
    return EvalInputs(
        source="trainer", rows=rows[: trainer.args.heldout_max_samples],
        settings=EpisodeSettings.from_trainer(trainer, seed), reward_funcs=list(trainer.reward_funcs),
        reward_names=list(trainer.reward_func_names), reward_weights=_weights(trainer),
        environment_factory=factory, split=split,
        progress=f"held-out episodes at step {trainer.state.global_step}" if shown else None,
    )
