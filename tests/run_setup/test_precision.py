"""The recipe is the run's one source of precision (training/run_setup/precision.py): an ACCELERATE_MIXED_PRECISION
that asks for another is refused by name, in the config (every run) and in the launchers' reading of a recipe."""

from __future__ import annotations

import pytest

from training.run_setup.config import StrictGRPOConfig
from training.run_setup.precision import (
    ENV,
    PrecisionError,
    check_environment,
    launch_mixed_precision,
    main,
    recipe_fields,
)

TINY = ["--config", "recipes/tiny_cpu.yaml"]  # bf16: false, use_cpu: true
GPU = ["--config", "recipes/qwen3_0.6b_lora.yaml"]  # bf16: true


def no_cuda() -> bool:
    return False


def cuda() -> bool:
    return True


@pytest.mark.parametrize(("argv", "expected"), [
    (TINY, {"bf16": False, "fp16": False, "use_cpu": True}),
    ([*TINY, "--bf16"], {"bf16": True, "fp16": False, "use_cpu": True}),
    ([*TINY, "--bf16", "true", "--max_steps", "2"], {"bf16": True, "fp16": False, "use_cpu": True}),
    ([*GPU, "--bf16=false", "--fp16", "--use_cpu", "false"], {"bf16": False, "fp16": True, "use_cpu": False}),
    (["--max_steps", "2"], {"bf16": None, "fp16": False, "use_cpu": False}),
])  # fmt: skip
def test_the_launchers_read_the_recipe_and_its_overrides_as_trl_does(argv, expected):
    assert recipe_fields(argv) == expected


def test_the_mixed_precision_a_launcher_passes_is_the_recipes():
    assert launch_mixed_precision(recipe_fields(TINY), environ={}) == "no"
    assert launch_mixed_precision(recipe_fields([*TINY, "--bf16", "true"]), environ={}) == "bf16"
    assert launch_mixed_precision(recipe_fields(GPU), environ={}) == "bf16"
    assert launch_mixed_precision(recipe_fields([*GPU, "--bf16", "false", "--fp16", "true"]), environ={}) == "fp16"
    unset = recipe_fields(["--max_steps", "1"])  # bf16: null resolves as StrictGRPOConfig does
    assert launch_mixed_precision(unset, environ={}, cuda_available=cuda) == "bf16"
    assert launch_mixed_precision(unset, environ={}, cuda_available=no_cuda) == "no"
    assert launch_mixed_precision(unset, on_cpu=True, environ={}, cuda_available=cuda) == "no"


def test_an_environment_that_asks_for_another_precision_is_refused_by_name():
    with pytest.raises(PrecisionError) as refused:
        check_environment(bf16=False, fp16=False, environ={ENV: "bf16"})
    assert str(refused.value).startswith(f"{ENV}='bf16' asks for another precision than the recipe's (bf16: false")
    with pytest.raises(PrecisionError, match=f"{ENV}='no'.*bf16: true"):
        check_environment(bf16=True, fp16=False, environ={ENV: "no"})
    with pytest.raises(PrecisionError, match=f"{ENV}='fp16'"):
        launch_mixed_precision(recipe_fields(GPU), environ={ENV: "fp16"})
    check_environment(bf16=True, fp16=False, environ={ENV: "bf16"})  # agreeing, or unset: accepted
    check_environment(bf16=False, fp16=False, environ={ENV: "no"})
    check_environment(bf16=False, fp16=False, environ={})


def test_every_config_refuses_an_environment_precision_other_than_its_own(monkeypatch):
    monkeypatch.setenv(ENV, "bf16")
    with pytest.raises(PrecisionError, match=f"{ENV}='bf16'"):
        StrictGRPOConfig("unused", use_cpu=True, bf16=False)
    config = StrictGRPOConfig("unused", use_cpu=True, bf16=True)
    assert config.mixed_precision == "bf16"
    monkeypatch.setenv(ENV, "no")
    assert StrictGRPOConfig("unused", use_cpu=True).mixed_precision == "no"  # bf16: null is off on CPU


def test_a_recipe_that_cannot_be_read_is_named_not_a_traceback(tmp_path):
    with pytest.raises(PrecisionError, match="missing.yaml"):
        main(["--launch-on-cpu", "--config", str(tmp_path / "missing.yaml")])
    with pytest.raises(PrecisionError, match="bf16='maybe' is not true or false"):
        main([*TINY, "--bf16", "maybe"])
