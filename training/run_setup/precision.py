"""The run's precision has one source: its recipe (`bf16`, `fp16`; the weights' `dtype`).

`accelerate launch` exports `ACCELERATE_MIXED_PRECISION` (from its config file or `--mixed_precision`), and
transformers' `TrainingArguments` takes that value whenever the recipe's `bf16` and `fp16` are both off: an
accelerate config saying `bf16` then turned on bf16 autocast behind a `bf16: false` recipe, and `run_summary.json`
still said `bf16: false`. So:

* `check_environment` refuses, by name, an environment whose `ACCELERATE_MIXED_PRECISION` differs from the recipe's
  precision (`StrictGRPOConfig.__post_init__` calls it: before the model loads, exit 2 through `BadInputError`);
* the launchers pass the recipe's precision to `accelerate launch --mixed_precision`, read by
  `python -m training.run_setup.precision --config FILE [TRAINING ARGS...]` (below), so a launched run always agrees.

The recipe's `bf16: null` (StrictGRPOConfig's default) means bf16 on a CUDA GPU unless `fp16` is on, off on CPU:
`resolved_bf16` is that rule, for the config and for the launchers alike.
"""

from __future__ import annotations

import os

from training.errors import BadInputError

ENV = "ACCELERATE_MIXED_PRECISION"
MIXED_PRECISIONS = ("no", "bf16", "fp16")


class PrecisionError(BadInputError):
    """The environment asks for another precision than the recipe's; the message names the variable and the field."""


def resolved_bf16(bf16: bool | None, fp16: bool, use_cpu: bool, cuda_available) -> bool:
    """The recipe's `bf16` with None resolved: on when a CUDA GPU is used and `fp16` is off. `cuda_available` is
    called only when needed (launchers on CPU-only machines need no torch import for a recipe that says it)."""
    if bf16 is not None:
        return bf16
    return not use_cpu and not fp16 and cuda_available()


def mixed_precision(bf16: bool, fp16: bool) -> str:
    """accelerate's name for the recipe's precision: 'fp16', 'bf16' or 'no'."""
    return "fp16" if fp16 else "bf16" if bf16 else "no"


def check_environment(bf16: bool, fp16: bool, environ=None) -> None:
    """Refuse `ACCELERATE_MIXED_PRECISION` when it is set to anything but the recipe's precision."""
    env = os.environ if environ is None else environ
    asked = env.get(ENV)
    if asked is None:
        return
    wanted = mixed_precision(bf16, fp16)
    if asked.strip().lower() == wanted:
        return
    fields = f"bf16: {str(bf16).lower()}, fp16: {str(fp16).lower()}"
    raise PrecisionError(
        f"{ENV}={asked!r} asks for another precision than the recipe's ({fields}: mixed precision {wanted!r}). The "
        f"recipe decides the precision: set the recipe's bf16/fp16 to what you want, and launch with "
        f"`accelerate launch --mixed_precision {wanted}` (the launchers in launchers/ pass the recipe's), or unset {ENV}"
    )


# ---- the launchers' reading of a recipe (no TRL import: a dry run stays fast) ---------------------------------------
TRUE, FALSE = ("yes", "true", "t", "y", "1"), ("no", "false", "f", "n", "0")  # HfArgumentParser's string_to_bool
FIELDS = {"bf16": None, "fp16": False, "use_cpu": False}  # StrictGRPOConfig's defaults


def _as_bool(name: str, value) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in TRUE:
        return True
    if text in FALSE:
        return False
    if text in ("none", "null"):
        return None
    raise PrecisionError(f"{name}={value!r} is not true or false")


def recipe_fields(argv: list[str]) -> dict:
    """`bf16`, `fp16` and `use_cpu` of a `training.train` command line: the recipe's (`--config FILE`) with the
    command line's flags over them, as TRL's parser reads them (`--bf16`, `--bf16 false`, `--bf16=false`)."""
    import yaml

    fields = dict(FIELDS)
    if "--config" in argv and argv.index("--config") + 1 < len(argv):
        path = argv[argv.index("--config") + 1]
        try:
            with open(path, encoding="utf-8") as f:
                recipe = yaml.safe_load(f) or {}
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
            raise PrecisionError(f"recipe {path!r} cannot be read for its precision: {err}") from None
        if isinstance(recipe, dict):
            fields.update({k: recipe[k] for k in FIELDS if k in recipe})
    i = 0
    while i < len(argv):
        name, has_value, value = argv[i].partition("=")
        key = name[2:] if name.startswith("--") else None
        if key in FIELDS:
            following = argv[i + 1] if i + 1 < len(argv) else None
            if not has_value:  # a bare `--bf16` is true; `--bf16 VALUE` takes the next argument
                bare = following is None or following.startswith("--")
                value = "true" if bare else following
                i += 0 if bare else 1
            fields[key] = value
        i += 1
    return {k: _as_bool(k, v) for k, v in fields.items()}


def launch_mixed_precision(fields: dict, on_cpu: bool = False, environ=None, cuda_available=None) -> str:
    """The `--mixed_precision` for `accelerate launch` of a run with these recipe `fields` (`recipe_fields`, or a
    resolved recipe mapping); `on_cpu`: the launch config runs on CPU whatever the recipe says. Refuses an environment
    that asks for another precision."""
    def cuda() -> bool:
        import torch

        return torch.cuda.is_available()

    fields = {k: _as_bool(k, fields.get(k, default)) for k, default in FIELDS.items()}
    fp16 = bool(fields["fp16"])
    bf16 = resolved_bf16(fields["bf16"], fp16, on_cpu or bool(fields["use_cpu"]), cuda_available or cuda)
    check_environment(bf16, fp16, environ)
    return mixed_precision(bf16, fp16)


def main(argv: list[str]) -> str:
    on_cpu = bool(argv) and argv[0] == "--launch-on-cpu"
    return launch_mixed_precision(recipe_fields(argv[1:] if on_cpu else argv), on_cpu=on_cpu)


if __name__ == "__main__":
    # `python -m training.run_setup.precision [--launch-on-cpu] [TRAINING ARGS...]`: prints 'no', 'bf16' or 'fp16', the
    # recipe's precision for `accelerate launch --mixed_precision`; exit 2 naming ACCELERATE_MIXED_PRECISION when the
    # environment asks for another one.
    import sys

    from training.errors import bad_input_exits

    with bad_input_exits():
        print(main(sys.argv[1:]))
