"""What a GPU machine lacks for the GPU check, and installing it from a folder of wheels with no network.

Needed: the project's dependencies (pyproject.toml), pytest and bitsandbytes (the `gpu` tests), and the project
itself installed (its entry points register the tasks and reward names). Optional: DeepSpeed and vLLM, installed when
their wheels are in the folder; without them their tests skip and the report says so. Nothing here imports more than
the standard library and, when present, `packaging`, so it runs on a bare Python.
"""

from __future__ import annotations

import ast
import importlib.metadata as metadata
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROJECT = "strict-grpo"
FOR_THE_CHECK = ["pytest>=9", "pytest-xdist>=3.6,<4", "bitsandbytes>=0.50,<0.51"]  # xdist: pyproject's addopts
TO_INSTALL_THE_PROJECT = ["setuptools>=68"]  # pyproject's build backend, for the editable install without isolation
OPTIONAL_NAMES = ("deepspeed", "vllm")  # of pyproject's `gpu` extra, at its ranges


def gpu_extra(pyproject: Path = REPO / "pyproject.toml") -> list[str]:
    """`[project.optional-dependencies] gpu` of pyproject.toml (its one-line literal where Python lacks tomllib)."""
    text = pyproject.read_text(encoding="utf-8")
    try:
        import tomllib
    except ModuleNotFoundError:
        return ast.literal_eval(re.search(r"^gpu = (\[.*?\])$", text, re.M).group(1))
    return tomllib.loads(text)["project"]["optional-dependencies"]["gpu"]


OPTIONAL = [r for r in gpu_extra() if re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0] in OPTIONAL_NAMES]


def project_dependencies(pyproject: Path = REPO / "pyproject.toml") -> list[str]:
    """`[project] dependencies` of pyproject.toml (tomllib where Python has it, else the list's literal text)."""
    text = pyproject.read_text(encoding="utf-8")
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the list is a plain literal of strings with comments
        block = re.search(r"^dependencies = (\[.*?^\])", text, re.S | re.M).group(1)
        return ast.literal_eval(re.sub(r"#[^\n]*", "", block))
    return tomllib.loads(text)["project"]["dependencies"]


def unmet(requirements: list[str]) -> list[str]:
    """The requirements whose distribution is not installed, or installed at a version out of range (checked when
    `packaging` is importable, else presence only: `packaging` itself is then listed first)."""
    try:
        from packaging.requirements import Requirement
    except ModuleNotFoundError:
        Requirement = None
    missing = [] if Requirement else ["packaging"]
    for text in requirements:
        name = Requirement(text).name if Requirement else re.split(r"[<>=!~;\[ ]", text, maxsplit=1)[0]
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            missing.append(text)
            continue
        if Requirement and not Requirement(text).specifier.contains(version, prereleases=True):
            missing.append(text)
    return missing


def project_installed() -> bool:
    try:
        dist = metadata.distribution(PROJECT)
    except metadata.PackageNotFoundError:
        return False
    return any(ep.group == "strict_grpo.tasks" for ep in dist.entry_points)


def plan() -> dict:
    installed = project_installed()
    return {
        "missing": unmet(project_dependencies() + FOR_THE_CHECK + ([] if installed else TO_INSTALL_THE_PROJECT)),
        "optional_missing": unmet(OPTIONAL),
        "project_installed": installed,
    }


def pip(*args: str) -> list[str]:
    return [sys.executable, "-m", "pip", "install", "--no-index", *args]


def install(wheels: str | None, dry_run: bool, timeout_s: float) -> dict:
    """Install what `plan()` finds missing from `wheels` (pip --no-index --find-links), the optional packages whose
    wheels are there, and the project (editable, no dependencies); under `dry_run` pip only resolves (`--dry-run`).
    The result says what was missing, each pip command and its outcome, and what is still missing afterwards."""
    before = plan()
    result: dict = {**before, "wheels": wheels, "commands": []}
    needed = before["missing"]
    if not needed and before["project_installed"]:
        result.update(status="passed", note="nothing to install")
        return result
    if needed and not wheels:
        result.update(status="failed", note=f"missing {needed} and no --wheels folder to install them from")
        return result
    commands = []
    if needed:
        commands.append(pip("--find-links", wheels, *needed))
    optional = [r for r in before["optional_missing"] if wheels and _has_wheel(wheels, r)]
    if optional:
        commands.append(pip("--find-links", wheels, *optional))
    if not before["project_installed"]:
        commands.append(pip("--no-deps", "--no-build-isolation", "-e", str(REPO)))
    for cmd in commands:
        cmd = [*cmd, "--dry-run"] if dry_run else cmd
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout_s)
        result["commands"].append({"command": cmd, "returncode": proc.returncode,
                                   "output_tail": (proc.stdout + proc.stderr)[-2000:]})
        if proc.returncode != 0:
            result.update(status="failed", note=f"pip exited {proc.returncode}")
            return result
    after = plan()
    result["still_missing"] = [] if dry_run else after["missing"]
    ok = dry_run or (not after["missing"] and after["project_installed"])
    result.update(status="passed" if ok else "failed")
    return result


def _has_wheel(wheels: str, requirement: str) -> bool:
    name = re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0].replace("-", "_").lower()
    return any(p.name.lower().startswith(name + "-") for p in Path(wheels).glob("*.whl"))
