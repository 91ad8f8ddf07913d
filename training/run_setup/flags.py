"""Strict flags: read once from the environment at start-up, validated, refused with a clear error when bad.

`DEFAULTS` below is the one place the safe defaults are written: a Python entry point started without a launcher
gets them, the workflow runner gives them to its runs, and the launchers export what `python -m training.run_setup.flags
--export` prints (the flags in force, validated).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from training.errors import BadInputError

DEFAULTS = {
    "FORCE_RATE": "0.0",
    "ASSIST_WARMUP": "0",
    "RL_DISABLE_FORCED": "1",
    "PPO_RECORD_AT_SAMPLE": "1",
    "STRICT_TRAJ_KEYS": "1",
}


class FlagError(BadInputError):
    """A strict flag has a value we refuse."""


@dataclass(frozen=True)
class StrictFlags:
    force_rate: float
    assist_warmup: int
    rl_disable_forced: bool
    ppo_record_at_sample: bool
    strict_traj_keys: bool

    def as_env(self) -> dict[str, str]:
        return {
            "FORCE_RATE": repr(self.force_rate),
            "ASSIST_WARMUP": str(self.assist_warmup),
            "RL_DISABLE_FORCED": str(int(self.rl_disable_forced)),
            "PPO_RECORD_AT_SAMPLE": str(int(self.ppo_record_at_sample)),
            "STRICT_TRAJ_KEYS": str(int(self.strict_traj_keys)),
        }


def _bool_flag(name: str, raw: str) -> bool:
    if raw.strip() not in ("0", "1"):
        raise FlagError(f"{name}={raw!r} is not valid: expected 0 or 1")
    return raw.strip() == "1"


def _float_flag(name: str, raw: str, low: float, high: float) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise FlagError(f"{name}={raw!r} is not a number (expected a value in [{low}, {high}])") from None
    if not low <= value <= high:  # also refuses NaN
        raise FlagError(f"{name}={raw!r} is out of range: expected a value in [{low}, {high}]")
    return value


def _int_flag(name: str, raw: str, low: int) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        raise FlagError(f"{name}={raw!r} is not an integer (expected an integer >= {low})") from None
    if value < low:
        raise FlagError(f"{name}={raw!r} is out of range: expected an integer >= {low}")
    return value


def read_flags(environ: dict[str, str] | None = None) -> StrictFlags:
    """Parse the strict flags from `environ` (default `os.environ`), using the safe defaults for unset ones."""
    env = os.environ if environ is None else environ
    raw = {name: env.get(name, default) for name, default in DEFAULTS.items()}
    return StrictFlags(
        force_rate=_float_flag("FORCE_RATE", raw["FORCE_RATE"], 0.0, 1.0),
        assist_warmup=_int_flag("ASSIST_WARMUP", raw["ASSIST_WARMUP"], 0),
        rl_disable_forced=_bool_flag("RL_DISABLE_FORCED", raw["RL_DISABLE_FORCED"]),
        ppo_record_at_sample=_bool_flag("PPO_RECORD_AT_SAMPLE", raw["PPO_RECORD_AT_SAMPLE"]),
        strict_traj_keys=_bool_flag("STRICT_TRAJ_KEYS", raw["STRICT_TRAJ_KEYS"]),
    )


if __name__ == "__main__":
    # `python -m training.run_setup.flags [--export]`: validate and print the flags in force, as NAME=VALUE lines or, with
    # --export, as shell `export` lines that the launchers evaluate.
    import shlex
    import sys

    try:
        flags = read_flags()
    except FlagError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    prefix = "export " if sys.argv[1:] == ["--export"] else ""
    for name, value in flags.as_env().items():
        print(f"{prefix}{name}={shlex.quote(value)}")
