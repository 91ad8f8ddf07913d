"""A resumed run's final `train_loss` is the whole run's mean (training/outputs/train_loss.py)."""

import pytest

from training.outputs.train_loss import loss_before, whole_run_loss

HISTORY = [{"step": 2, "loss": 0.5}, {"step": 2, "eval_x": 1.0}, {"step": 4, "loss": 0.25}, {"step": 6, "loss": 1.0}]


def test_the_loss_before_a_step_weights_each_log_by_the_steps_it_covers():
    assert loss_before(HISTORY, 4) == (pytest.approx(0.5 * 2 + 0.25 * 2), 4)
    assert loss_before(HISTORY, 0) == (0.0, 0)


def test_the_whole_run_mean_adds_the_earlier_steps_to_this_calls_sum():
    # steps 1..4 from the history (1.5), steps 5..8 summed by this call (2.0): mean over 8 steps
    assert whole_run_loss(HISTORY, 4, 2.0, 8) == (pytest.approx(3.5 / 8), 8)


def test_a_checkpoint_between_logs_counts_only_the_steps_with_a_known_loss():
    # resumed at 5: step 5's loss was never logged; steps 1..4 and 6..8 are
    assert whole_run_loss(HISTORY, 5, 1.5, 8) == (pytest.approx(3.0 / 7), 7)
