"""The timing probe never assumes a metric key exists: TRL's own tests give the trainer a plain `_metrics` dict."""

from __future__ import annotations

import pytest

from training.step.diagnostics import timed


def test_an_error_in_the_timed_block_is_the_one_raised_with_a_plain_dict():
    metrics: dict = {}
    with pytest.raises(ValueError, match="rollout_func must return keys"):
        with timed(metrics, "generate"):
            raise ValueError("rollout_func must return keys ...")
    assert len(metrics["timing/generate_s"]) == 1


def test_timings_append_to_an_existing_list():
    metrics = {"timing/loss_s": [1.0]}
    with timed(metrics, "loss"):
        pass
    assert metrics["timing/loss_s"][0] == 1.0 and len(metrics["timing/loss_s"]) == 2 and metrics["timing/loss_s"][1] >= 0
