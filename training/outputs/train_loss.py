"""The whole run's mean training loss at the end of a resumed run.

transformers reports `train_loss` as the loss summed over the steps of this `train()` call divided by their number, so
a run resumed from step k reports the mean of steps k+1..N, not the run's. The steps before k are in the checkpoint's
log history: each training-step log holds the mean loss over the steps since the previous one, so the loss summed
over the logged steps is the sum of (logged loss x steps it covers). Exact when every step up to the checkpoint was
logged (`save_steps` a multiple of `logging_steps`, as in every recipe here); otherwise the steps between the last log
and the checkpoint have no recorded loss, the mean is over the steps that have one, and the end-of-training log says
how many (`train_loss_steps`).
"""

from __future__ import annotations


def loss_before(log_history: list[dict], step: int) -> tuple[float, int]:
    """(the loss summed over the logged steps up to `step`, the number of those steps) from the training-step logs."""
    total, last = 0.0, 0
    for logs in log_history:
        if "loss" in logs and logs["step"] <= step:
            total += logs["loss"] * (logs["step"] - last)
            last = logs["step"]
    return total, last


def whole_run_loss(log_history: list[dict], resumed_at: int, this_call_total: float, global_step: int
                   ) -> tuple[float, int]:
    """(mean loss over the run's steps with a known loss, their number): the steps before `resumed_at` from the log
    history, then this call's summed loss over its steps resumed_at+1..global_step."""
    earlier, covered = loss_before(log_history, resumed_at)
    steps = covered + global_step - resumed_at
    return (earlier + this_call_total) / max(steps, 1), steps
