"""Choice credit and step credit (with its branches) trained together with the features they meet: dynamic sampling,
forcing, reference sync, `num_iterations` 2, record-at-sample, the turn limits and both void-turn rules. The starting
policy plays (its turns choose options, so there are choices and states to credit); each cell must pass the generic
checks of `tests/test_feature_combinations.py`, log its credit's metrics, and keep forced rows, void episodes under
`exclude` and branch tokens out of the loss."""

from __future__ import annotations

import pytest
import torch

from tests.tasks.causal.trainer_support import build_sampled_causal_trainer, score
from tests.test_feature_combinations import cell_flags, cell_id, cell_settings, check_cell, training_logs
from training.algorithms.trajectory import loss_mask
from training.step.metric_names import CHOICE_CREDIT, CHOICE_LOSS, CONTRACT, STEP_BRANCHES, STEP_CREDIT
from training.tasks.causal.starting_policy import STARTING_POLICY_DIR

EPISODE = dict(max_completion_length=400, max_tool_calling_iterations=6, max_tool_calls_per_episode=6,
               max_turn_tokens=24)
# (dynamic sampling, credit, forcing, reference sync, num_iterations)
CELLS = [
    (True, "choice", True, True, 2),
    (False, "choice", False, False, 2),
    (True, "step", False, True, 2),
    (False, "step", True, False, 1),
]
CREDIT = {"choice": dict(call_credit=True, choice_credit=True),
          "step": dict(call_credit=True, step_credit=True, step_branches=4)}
METRICS = {credit: [name for name, when in CONTRACT.items() if when in conditions]  # the contract's names
           for credit, conditions in (("choice", (CHOICE_CREDIT, CHOICE_LOSS)), ("step", (STEP_CREDIT, STEP_BRANCHES)))}


@pytest.mark.parametrize("cell", CELLS, ids=[cell_id(c) for c in CELLS])
def test_credit_trains_with_every_feature_it_meets(tmp_path, cell):
    dynamic, credit, forcing, sync, iterations = cell
    trainer = build_sampled_causal_trainer(str(tmp_path), str(STARTING_POLICY_DIR), cell_flags(forcing), max_steps=2,
                                           **CREDIT[credit], **EPISODE, **cell_settings(dynamic, "grpo", sync,
                                                                                       iterations))
    trainer.train()
    logs = training_logs(str(tmp_path))
    check_cell(logs, dynamic, "grpo", forcing, sync, iterations)
    generated = logs[::iterations]
    assert len(METRICS[credit]) >= 5
    for name in METRICS[credit]:
        assert all(name in log for log in generated), name
    assert all(log["loss"] != 0.0 for log in logs)
    if credit == "step":
        assert all(log["step_credit/branches"] == 4.0 for log in generated)


def test_forced_rows_and_excluded_void_episodes_add_no_choice_term(tmp_path):
    """Forced first turns are choices too (the teacher's option), and under `exclude` a void episode's choices are
    recorded: both are out of the loss mask, so their choice tokens weigh 0 in the choice term."""
    trainer = build_sampled_causal_trainer(str(tmp_path), str(STARTING_POLICY_DIR), cell_flags(True, "0.5"),
                                           call_credit=True, choice_credit=True, void_turn_rule="exclude",
                                           **{**EPISODE, "max_turn_tokens": 10})
    batch = score(trainer)
    at = (batch["choice_tokens"] >= 0).any(dim=-1)
    out = loss_mask(batch) == 0
    assert batch["forced"].any() and at[batch["forced"]].any()  # forced rows made choices ...
    assert (at & out).any()  # ... and those choice tokens are out of the loss mask
    masked = {**batch, "choice_tokens": torch.where((at & out).unsqueeze(-1), batch["choice_tokens"], -1)}
    with trainer.choice_credit.capturing():  # the term of the masked choice tokens alone: exactly 0
        trainer.model(input_ids=torch.cat([masked["prompt_ids"], masked["completion_ids"]], dim=1),
                      attention_mask=torch.cat([masked["prompt_mask"], masked["completion_mask"]], dim=1))
    assert trainer.choice_credit.loss(trainer.model, masked, _Metrics(), 1, 1, 1).item() == 0.0


class _Metrics(dict):
    def __missing__(self, key):
        self[key] = []
        return self[key]


def test_branch_tokens_never_join_the_batch(tmp_path):
    trainer = build_sampled_causal_trainer(str(tmp_path), str(STARTING_POLICY_DIR), cell_flags(False),
                                           call_credit=True, step_credit=True, step_branches=6, **EPISODE)
    batch = score(trainer)
    assert trainer._metrics["train"]["step_credit/branches"][-1] == 6.0
    n = trainer.args.per_device_train_batch_size
    for key in ("completion_ids", "sampling_per_token_logps", "advantages", "tool_mask"):
        assert batch[key].size(0) == n  # the rollouts only: the continuations were value samples
    recorded = batch["sampling_per_token_logps"][loss_mask(batch).bool()]
    assert torch.isfinite(recorded).all() and (recorded < 0).any()  # the rollouts' own sample-time log-probs
