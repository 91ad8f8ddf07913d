"""Environments' per-episode metrics reach the step's logs as batch means; bad values are refused by name."""

import math

import pytest

from training.features.environment_metrics import EnvironmentMetrics
from training.outputs.run_summary import read_metrics
from training.tasks.workspace.env import WorkspaceEnv


class CountingEnv(WorkspaceEnv):
    """The workspace environment, reporting how many messages its channels hold at the end of the episode."""

    @property
    def episode_metrics(self) -> dict[str, float]:
        return {"episode/posts": float(sum(len(m) for m in self.state.channels.values()))}


def test_episode_metrics_are_logged_as_batch_means(make_env_trainer):
    trainer = make_env_trainer(environment_factory=CountingEnv, max_steps=1)
    assert "episode_metrics" not in trainer._env_tools[None]  # a property, never offered to the model as a tool
    trainer.train()
    (log,) = [row for row in read_metrics(trainer.args.output_dir) if "loss" in row]
    # the default workspace holds 8 messages; each post the policy made adds one
    assert log["episode/posts"] >= 8.0 and math.isfinite(log["episode/posts"])


class _Accelerator:
    device = "cpu"

    @staticmethod
    def gather(t):
        return t


def test_a_non_finite_episode_metric_is_refused_naming_it():
    class Env:
        episode_metrics = {"causal/regret": float("nan")}

    with pytest.raises(ValueError, match=r"Env.episode_metrics\['causal/regret'\] = nan"):
        EnvironmentMetrics().log([Env()], _Accelerator(), {})
