"""Caches survive kills: the tiny-Qwen3 model cache (like the warm starts) appears only once complete, and a leftover
of a killed writer never poisons later runs. The warm start shows its progress."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from training.run_setup.models import resolve_model_path
from training.run_setup.tiny_qwen3 import COMPLETE_FILE, build_fingerprint
from training.run_setup.warm_start import supervised_warm_start


def cache_name(seed: int) -> str:
    return f"tiny-qwen3-{build_fingerprint()}-seed{seed}"


def usable(path: str) -> None:
    tokenizer = AutoTokenizer.from_pretrained(path)
    assert tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False)


def test_interrupted_model_cache_write_leaves_nothing_under_the_cache_name(tmp_path, monkeypatch):
    """Interrupted after the weights, before the tokenizer: the cache is not there, so the next run builds it again
    (written in place, a half-written cache poisoned every later run); a killed writer's leftover is removed."""
    monkeypatch.setenv("STRICT_GRPO_CACHE", str(tmp_path))
    real_save = PreTrainedTokenizerFast.save_pretrained

    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt("killed while writing the tokenizer")

    monkeypatch.setattr(PreTrainedTokenizerFast, "save_pretrained", interrupted)
    with pytest.raises(KeyboardInterrupt):
        resolve_model_path("tiny-qwen3", seed=3)
    assert not (tmp_path / "models" / cache_name(3)).exists()

    monkeypatch.setattr(PreTrainedTokenizerFast, "save_pretrained", real_save)
    dead = subprocess.Popen(["true"])
    dead.wait()  # a pid that no longer runs: the leftover of a writer killed mid-write
    leftover = tmp_path / "models" / f"{cache_name(3)}.tmp-{dead.pid}"
    leftover.mkdir(parents=True)
    (leftover / "model.safetensors").write_bytes(b"half")
    usable(resolve_model_path("tiny-qwen3", seed=3))
    assert [p.name for p in (tmp_path / "models").iterdir()] == [cache_name(3)]


def test_cache_left_half_written_by_an_older_in_place_writer_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("STRICT_GRPO_CACHE", str(tmp_path))
    dest = tmp_path / "models" / cache_name(0)
    dest.mkdir(parents=True)
    (dest / "model.safetensors").write_bytes(b"")  # killed while writing the weights
    path = resolve_model_path("tiny-qwen3", seed=0)
    assert Path(path) == dest and (dest / COMPLETE_FILE).exists()
    usable(path)


def test_warm_start_shows_a_progress_bar_with_an_eta_unless_disabled(tiny_model_dir, task_rows, tmp_path, monkeypatch,
                                                                      capsys):  # fmt: skip
    monkeypatch.setenv("STRICT_GRPO_CACHE", str(tmp_path))
    supervised_warm_start(tiny_model_dir, task_rows[:8], steps=3, batch_size=4)
    err = capsys.readouterr().err
    assert "warm start: 100%" in err and "3/3" in err and "<00:00" in err  # elapsed<remaining, tqdm's ETA
    supervised_warm_start(tiny_model_dir, task_rows[:8], steps=2, batch_size=4, show_progress=False)
    assert "warm start" not in capsys.readouterr().err
