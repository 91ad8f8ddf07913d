"""The starting policy's build shapes its base by three flags (`--hidden_size`, `--num_hidden_layers`,
`--num_attention_heads`, issue 68's sweep): the defaults are the shipped shape, another shape is its own cached base
of that shape, and a shape the heads cannot split is refused naming the flags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from training.errors import BadInputError
from training.run_setup.models import cache_root
from training.tasks.causal.starting_policy import STARTING_POLICY_DIR, BuildSettings
from training.tasks.causal.tiny_model import CAUSAL_ARCH, resolve_causal_model


def test_the_default_shape_is_the_shipped_policys():
    shipped = json.loads((STARTING_POLICY_DIR / "config.json").read_text())
    assert BuildSettings().arch() == CAUSAL_ARCH
    assert all(shipped[key] == value for key, value in CAUSAL_ARCH.items() if key != "rope_parameters")


def test_another_shape_is_a_base_of_that_shape_cached_apart():
    settings = BuildSettings(hidden_size=64, num_hidden_layers=2, num_attention_heads=2)
    small = Path(resolve_causal_model(cache_root(), 0, settings.arch()))
    config = json.loads((small / "config.json").read_text())
    assert (config["hidden_size"], config["num_hidden_layers"], config["num_attention_heads"],
            config["num_key_value_heads"], config["head_dim"], config["intermediate_size"]) == (64, 2, 2, 1, 32, 192)
    default = Path(resolve_causal_model(cache_root(), 0))
    assert small != default and json.loads((default / "config.json").read_text())["hidden_size"] == 128
    assert (small / "tokenizer.json").read_text() == (default / "tokenizer.json").read_text()


@pytest.mark.parametrize("width, heads", [(100, 3), (96, 5)])
def test_a_width_the_heads_cannot_split_is_refused_naming_the_flags(width, heads):
    with pytest.raises(BadInputError, match="--hidden_size / --num_attention_heads"):
        BuildSettings(hidden_size=width, num_attention_heads=heads)
