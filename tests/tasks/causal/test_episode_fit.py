"""train_scm's completion limit and context fit the file's teacher episodes (`trace_lengths.fitted_limits`): the
recipe's 720 tokens cut most episodes of a nonlinear file, whose replies list more options."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from training.errors import BadInputError
from training.outputs.run_record import RECORD_FILE
from training.run_setup.trace_lengths import (
    COMPLETION_MARGIN,
    FittedLimits,
    TraceLength,
    fitted_limits,
    reference_lengths,
)
from training.tasks.causal import train_scm
from training.tasks.causal.env import make_causal_env
from training.tasks.causal.starting_policy import STARTING_POLICY_DIR

SEMPLER6 = Path(__file__).resolve().parents[3] / "examples" / "scms" / "sempler6_nonlinear.yaml"


def test_the_limits_grow_to_hold_every_episode_with_its_margin_and_never_shrink():
    held = fitted_limits([TraceLength(300, 400)], 720, 1024)  # 500 tokens of completion fit both limits
    assert held == FittedLimits(720, 1024, 400) and held.grew(720, 1024) is False
    fit = fitted_limits([TraceLength(500, 400), TraceLength(300, 1000)], 720, 1024)
    assert fit.max_completion_length == 1280  # 1250, in steps of 64
    assert fit.context == 1792  # 300 + 1250 (the longest prompt's own episode fits), in steps of 256
    assert fit.longest_completion == 1000 and fit.grew(720, 1024)
    with pytest.raises(ValueError, match="no reference episodes"):
        fitted_limits([], 720, 1024)


def test_train_scm_on_a_nonlinear_file_fits_its_teacher_episodes(tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)
    flags = ["--scm", str(SEMPLER6), "--train_rows", "4", "--heldout_rows", "1"]
    with caplog.at_level(logging.INFO, logger=train_scm.__name__):
        recipe = train_scm.scm_recipe([*flags, "--output_dir", "run"])
    args = recipe.training_args
    assert f"max_completion_length 720 -> {args.max_completion_length}, the model's context 1024 -> " in caplog.text
    context = args.model_init_kwargs["max_position_embeddings"]
    tokenizer = AutoTokenizer.from_pretrained(STARTING_POLICY_DIR)
    lengths = reference_lengths(tokenizer, recipe.rows["train"], make_causal_env("additive"),
                                dict(args.chat_template_kwargs))
    assert max(x.completion for x in lengths) * COMPLETION_MARGIN > 720  # the recipe's limit leaves them no margin
    assert all(COMPLETION_MARGIN * x.completion <= args.max_completion_length for x in lengths)
    assert all(x.prompt + COMPLETION_MARGIN * x.completion <= context for x in lengths) and context > 1024
    given = train_scm.scm_recipe([*flags, "--output_dir", "run2", "--max_completion_length", "720"]).training_args
    assert given.max_completion_length == 720 and "max_position_embeddings" not in (given.model_init_kwargs or {})
    with pytest.raises(BadInputError, match="sempler6_nonlinear.yaml: the teacher's episodes reach .* vLLM"):
        train_scm.scm_recipe([*flags, "--output_dir", "run3", "--use_vllm", "true"])


def test_a_resumed_run_keeps_the_limits_it_started_with(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run").mkdir()
    started = {"max_completion_length": 1536, "model_init_kwargs": {"max_position_embeddings": 2048}}
    (tmp_path / "run" / RECORD_FILE).write_text(json.dumps({"recipe": started}))
    flags = ["--scm", str(SEMPLER6), "--train_rows", "1", "--heldout_rows", "1", "--output_dir", "run"]
    args = train_scm.scm_recipe([*flags, "--resume_from_checkpoint", "true"]).training_args
    assert (args.max_completion_length, args.model_init_kwargs) == (1536, {"max_position_embeddings": 2048})
