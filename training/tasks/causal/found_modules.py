"""Modules found, not listed: the causal registries (policies, surrogates) import every module of their package whose
name passes a rule, each of which registers itself, so adding one is one new file."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from pathlib import Path


def package_modules(package: str, folder: str | Path, keep: Callable[[str], bool]) -> list[str]:
    """The full names of the modules in `folder` (the package `package`) whose short name `keep` accepts, in file-name
    order."""
    found = sorted(pkgutil.iter_modules([str(folder)]), key=lambda m: m.name)
    return [f"{package}.{m.name}" for m in found if keep(m.name)]


def import_all(modules: list[str]) -> None:
    for module in modules:
        importlib.import_module(module)  # each registers itself on import
