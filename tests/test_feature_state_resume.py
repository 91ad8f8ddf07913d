"""Features that keep state across steps have it saved in every checkpoint and restored on resume, so a resumed run
draws the same top-up prompts and counts the same streaks as an uninterrupted one."""

from __future__ import annotations

import os

import pytest
from transformers import TrainerCallback

from tests.features.test_dynamic_sampling import odd_answers_only_reward
from training.errors import MissingPathError
from training.trainer import FEATURE_STATE_FILE

SETTINGS = dict(dynamic_sampling=True, dynamic_sampling_max_rounds=3, max_steps=2, save_strategy="steps",
                save_steps=2, logp_check_steps=1, strict_health=False)


def _rows(task_rows):
    even = [r for r in task_rows if int(r["answer"]) % 2 == 0]
    odd = [r for r in task_rows if int(r["answer"]) % 2 == 1]
    return even[:24] + odd[:8]  # mostly prompts without signal: dynamic sampling draws top-ups


def test_resume_restores_every_features_state(make_trainer, task_rows):
    first = make_trainer(rows=_rows(task_rows), reward_funcs=[odd_answers_only_reward], **SETTINGS)
    first.train()
    saved = first._feature_state()
    assert saved["dynamic_sampling"]["draws"] > 0 and saved["record_at_sample"]["generation_batches_seen"] == 2

    second = make_trainer(rows=_rows(task_rows), reward_funcs=[odd_answers_only_reward], **SETTINGS)
    assert second._feature_state() != saved
    restored = {}

    class AtTrainBegin(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            restored.update(second._feature_state())

    second.add_callback(AtTrainBegin())
    second.train(resume_from_checkpoint=f"{first.args.output_dir}/checkpoint-2")
    assert restored == saved


def test_a_checkpoint_without_feature_state_is_refused(make_trainer, task_rows):
    first = make_trainer(**{**SETTINGS, "dynamic_sampling": False})
    first.train()
    checkpoint = f"{first.args.output_dir}/checkpoint-2"
    os.remove(os.path.join(checkpoint, FEATURE_STATE_FILE))
    with pytest.raises(MissingPathError, match=FEATURE_STATE_FILE):
        make_trainer(**{**SETTINGS, "dynamic_sampling": False}).train(resume_from_checkpoint=checkpoint)
