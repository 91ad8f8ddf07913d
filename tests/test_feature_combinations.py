"""Features trained together: dynamic sampling x estimator x forcing x reference sync x num_iterations.

Every cell runs a short training on the workspace tool environment (forcing needs reference tool calls) and must
finish with a finite loss and the health metrics behaving as documented. The default run covers every pair of
settings (a strength-2 covering array, 6 cells) plus the two crashes found by hand; `-m slow` runs all 48 cells.
"""

from __future__ import annotations

import itertools
import math

import pytest

from training.outputs.run_summary import read_metrics
from training.run_setup.flags import read_flags

ESTIMATORS = ("grpo", "gae", "hybrid")
# (dynamic sampling, estimator, forcing, reference sync, num_iterations): every pair of levels of any two factors
# appears in some row.
PAIRWISE = [
    (False, "grpo", False, False, 1),
    (True, "grpo", True, True, 2),
    (False, "gae", True, False, 2),
    (True, "gae", False, True, 1),
    (False, "hybrid", False, True, 2),
    (True, "hybrid", True, False, 1),
]
FULL_GRID = list(itertools.product((False, True), ESTIMATORS, (False, True), (False, True), (1, 2)))


def cell_id(cell) -> str:
    dynamic, estimator, forcing, sync, iterations = cell
    return f"ds{int(dynamic)}-{estimator}-force{int(forcing)}-sync{int(sync)}-it{iterations}"


def cell_settings(dynamic, estimator, sync, iterations) -> dict:
    """The trainer settings of one cell (forcing is a flag, not a setting)."""
    settings = dict(
        learning_rate=5e-3,
        advantage_estimator=estimator,
        dynamic_sampling=dynamic,
        dynamic_sampling_max_rounds=2,
        num_iterations=iterations,
        strict_health=False,  # the detectors must report, not stop, so every metric of every step can be read
    )
    if sync:
        settings.update(beta=0.04, sync_ref_model=True, ref_model_sync_steps=1, ref_model_mixup_alpha=1.0)
    return settings


def cell_flags(forcing, force_rate="0.5"):
    return read_flags({"FORCE_RATE": force_rate if forcing else "0.0", "ASSIST_WARMUP": "10"})


def run_cell(make_env_trainer, dynamic, estimator, forcing, sync, iterations, force_rate="0.5", max_steps=2):
    trainer = make_env_trainer(flags=cell_flags(forcing, force_rate), max_steps=max_steps,
                               **cell_settings(dynamic, estimator, sync, iterations))
    trainer.train()
    return training_logs(trainer.args.output_dir)


def training_logs(output_dir) -> list[dict]:
    """The training-step logs as `metrics.jsonl` has them, with the values callbacks add (health/*)."""
    return [row for row in read_metrics(output_dir) if "loss" in row]


def check_cell(logs, dynamic, estimator, forcing, sync, iterations, steps: int = 2) -> None:
    assert len(logs) == steps
    for log in logs:
        assert math.isfinite(log["loss"]) and math.isfinite(log["grad_norm"]), log
        assert log["forced/rl_fraction"] == 0.0  # a forced sample never reaches the on-policy loss
        for name in ("health/zero_loss", "health/all_groups_zero_std", "health/ratio_pinned"):
            assert log[name] in (0.0, 1.0), (name, log[name])
        assert log["health/ratio_pinned"] == 0.0  # old log-probs are the sample-time ones, never recomputed
        assert 0.0 <= log["trajectory/empty_loss_mask"] <= 1.0
        if estimator != "grpo":
            assert math.isfinite(log["value/loss"]), log
        else:
            assert "value/loss" not in log
        if sync:
            assert log["ref_sync/param_diffs"] == 0.0  # a hard sync leaves no tensor different
    generated = logs[::iterations]  # generation-time metrics: on steps that sampled a new batch
    if dynamic:
        assert all(log["dynamic_sampling/rounds"] >= 1 for log in generated)
    if sync:
        assert [log["ref_sync/count"] for log in logs] == [float(n) for n in range(1, steps + 1)]
    else:
        assert not any("ref_sync/count" in log for log in logs)
    if forcing:
        assert max(log["forced/assist_fraction"] for log in generated) > 0.0
    else:
        assert all(log["forced/assist_fraction"] == 0.0 for log in generated)
    if iterations == 2 and not forcing:
        assert logs[1]["ratio/std"] > 0.0  # the reuse pass sees a moved policy


@pytest.mark.parametrize("cell", PAIRWISE, ids=[cell_id(c) for c in PAIRWISE])
def test_pairwise_cells_train(make_env_trainer, cell):
    check_cell(run_cell(make_env_trainer, *cell), *cell)


@pytest.mark.parametrize("estimator", ["gae", "hybrid"])
def test_dynamic_sampling_with_a_value_head(make_env_trainer, estimator):
    """Found by hand: with both on, dynamic sampling's reward bookkeeping was cleared by the value head's
    (AttributeError: 'NoneType' object has no attribute 'device')."""
    cell = (True, estimator, False, False, 1)
    check_cell(run_cell(make_env_trainer, *cell), *cell)


def test_the_recipes_loss_type_with_every_feature_on(make_env_trainer):
    """The causal recipes train under `loss_type: dr_grpo` (a constant normaliser), where the cells above use TRL's
    default `dapo`: beside dynamic sampling, a value head, forcing, reference sync and two iterations the cell's checks
    hold too."""
    cell = (True, "gae", True, True, 2)
    trainer = make_env_trainer(flags=cell_flags(True), max_steps=2, loss_type="dr_grpo",
                               **cell_settings(True, "gae", True, 2))
    assert trainer.loss_type == "dr_grpo"
    trainer.train()
    check_cell(training_logs(trainer.args.output_dir), *cell)


def test_value_loss_of_an_all_forced_micro_batch_is_zero_not_nan(make_env_trainer):
    """Found by hand: a micro-batch whose rows are all forced has an empty loss mask, and the value loss divided 0 by
    0 (FloatingPointError: value/loss is nan). FORCE_RATE=1 makes every micro-batch so."""
    logs = run_cell(make_env_trainer, False, "gae", True, False, 1, force_rate="1.0")
    assert [log["value/loss"] for log in logs] == [0.0, 0.0]
    assert [log["trajectory/empty_loss_mask"] for log in logs] == [1.0, 1.0]
    assert all(math.isfinite(log["loss"]) for log in logs)


@pytest.mark.slow
@pytest.mark.parametrize("cell", FULL_GRID, ids=[cell_id(c) for c in FULL_GRID])
def test_every_cell_trains(make_env_trainer, cell):
    check_cell(run_cell(make_env_trainer, *cell), *cell)


def test_heldout_episodes_with_every_feature_on(make_env_trainer, workspace_rows):
    """The one held-out tool loop beside dynamic sampling, a value head, forcing, reference sync and two iterations:
    evaluating before training is reproducible (paired), leaves the policy in training mode, and the training after
    it still behaves as the cell's checks say."""
    cell = (True, "gae", True, True, 2)
    trainer = make_env_trainer(flags=cell_flags(True), max_steps=2, **cell_settings(True, "gae", True, 2))
    trainer.heldout_rows = workspace_rows[16:19]
    first, again = trainer.evaluate_heldout(), trainer.evaluate_heldout()
    assert first == again and math.isfinite(first["heldout/reward"]) and "heldout/tool_errors" in first
    assert trainer.model.training
    trainer.train()
    check_cell(training_logs(trainer.args.output_dir), *cell)
    assert math.isfinite(trainer.evaluate_heldout()["heldout/greedy_reward"])


def test_turn_limits_with_every_feature_on(make_env_trainer):
    """The turn limit, the call's end and void episodes out of the loss (`void_turn_rule: exclude`) beside dynamic
    sampling, forcing, reference sync, a value head and two iterations: every turn is within the limit and counted on
    the steps that sample, void episodes leave the loss, and the cell's checks hold. An EOS about one token in eight
    (a hook on the output layer) makes some of the untrained model's turns end and the others run on to the limit."""
    cell = (True, "gae", True, True, 2)
    trainer = make_env_trainer(flags=cell_flags(True), max_steps=2, max_turn_tokens=12, void_turn_rule="exclude",
                               **cell_settings(True, "gae", True, 2))
    eos = trainer.turn_limits.spec.stop_ids[0]

    def hook(module, inputs, output):
        out = output.clone()
        out[..., eos] = out.logsumexp(dim=-1) - 2.0
        return out

    handle = trainer.model.get_output_embeddings().register_forward_hook(hook)
    try:
        trainer.train()
    finally:
        handle.remove()
    logs = training_logs(trainer.args.output_dir)
    check_cell(logs, *cell)
    sampled, reused = logs[0], logs[1]
    assert sampled["turns/limit"] == 12.0 and 0 < sampled["turns/max_tokens"] <= 12.0
    assert 0 < sampled["turns/cut"] <= sampled["turns/void"] <= sampled["turns/count"]
    assert sampled["turns/void_episodes"] > 0
    assert "turns/count" not in reused and reused["health/turn_lengthening"] == 0.0  # a reuse pass samples nothing
