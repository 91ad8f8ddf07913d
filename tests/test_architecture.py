"""The shape of the house: one class overrides TRL, once per hook; features are plain objects; judges stand alone."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from transformers import Trainer
from trl import GRPOTrainer

from training.trainer import StrictGRPOTrainer

ROOT = Path(__file__).resolve().parents[1]


def _overridable() -> set[str]:
    return {name for cls in GRPOTrainer.__mro__ for name, value in vars(cls).items() if callable(value)}


def test_only_the_trainer_overrides_trl_and_each_hook_once():
    ours = [cls for cls in StrictGRPOTrainer.__mro__ if cls.__module__.startswith("training")]
    assert ours == [StrictGRPOTrainer]  # no mixins: features are objects the step calls
    source = ast.parse((ROOT / "training" / "trainer.py").read_text())
    (trainer_class,) = [n for n in source.body if isinstance(n, ast.ClassDef) and n.name == "StrictGRPOTrainer"]
    defined = [n.name for n in trainer_class.body if isinstance(n, ast.FunctionDef)]
    overrides = [name for name in defined if name in _overridable()]
    assert len(overrides) == len(set(overrides))  # each hook defined exactly once
    assert {"_generate_and_score_completions", "_compute_loss", "_calculate_rewards"} <= set(overrides)


def test_no_other_module_under_training_overrides_a_trl_hook():
    """Only the plain-TRL baseline (training/plain_trl.py, for comparisons) subclasses GRPOTrainer besides the strict
    trainer, and it overrides nothing but `__init__` (held-out evaluation and run files around TRL's own step)."""
    from training.plain_trl import PlainTRLGRPOTrainer

    for path in (ROOT / "training").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and path.name not in ("trainer.py", "plain_trl.py"):
                bases = {ast.unparse(b) for b in node.bases}
                assert not bases & {"GRPOTrainer", "Trainer", "StrictGRPOTrainer"}, (path, node.name)
    overridden = {name for name, value in vars(PlainTRLGRPOTrainer).items() if callable(value)} & _overridable()
    assert overridden == {"__init__"}


def test_features_override_no_trainer_method():
    import training.features as features

    for path in Path(features.__file__).parent.glob("*.py"):
        module = __import__(f"training.features.{path.stem}", fromlist=["_"])
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__:
                assert not issubclass(cls, (GRPOTrainer, Trainer)), cls


def test_judges_import_nothing_from_training():
    for path in (ROOT / "judges").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            assert not any(n == "training" or n.startswith("training.") for n in names), (path.name, names)
