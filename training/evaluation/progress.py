"""A progress bar of episodes done of their total, as the training bar shows steps: what every long evaluation
phase shows (the held-out evaluations of a run, `training.evaluate`, the baselines), so that a slow evaluation never
looks like a hang. A player takes its label (`progress`; None: no bar)."""

from __future__ import annotations

from tqdm.auto import tqdm


def episode_bar(total: int, label: str | None) -> tqdm:
    """A bar over `total` episodes labelled `label`; disabled (nothing shown, updates ignored) without one."""
    return tqdm(total=total, desc=label, unit="episode", disable=label is None)
