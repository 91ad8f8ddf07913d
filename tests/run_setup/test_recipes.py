"""Every recipe parses with the entry point's own parser: known keys, valid values, consistent batch shape."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from training.train import parse_args

RECIPES = sorted((Path(__file__).resolve().parents[2] / "recipes").glob("*.yaml"))


def parse_here(recipe: Path):
    """Parse a recipe; GPU recipes ask for bf16, which transformers refuses on a machine without a GPU."""
    argv = ["--config", str(recipe)]
    if not torch.cuda.is_available() and not recipe.name.startswith("tiny_"):
        argv += ["--bf16", "false"]
    return parse_args(argv)


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.name)
def test_recipe_parses(recipe):
    script_args, training_args, model_args = parse_here(recipe)
    assert Path(script_args.train_file).exists()
    assert training_args.per_device_train_batch_size % training_args.num_generations == 0
    assert model_args.use_peft


def test_qlora_recipes_ask_for_4bit_nf4():
    from trl import get_quantization_config

    qlora = [p for p in RECIPES if "qlora" in p.name]
    assert {p.name for p in qlora} == {"qwen3_0.6b_qlora.yaml", "tiny_cpu_qlora.yaml"}
    for recipe in qlora:
        _, _, model_args = parse_here(recipe)
        config = get_quantization_config(model_args)
        assert config is not None and config.load_in_4bit and config.bnb_4bit_quant_type == "nf4"
