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
    """Only the plain-TRL baseline (training/step/plain_trl.py, for comparisons) subclasses GRPOTrainer besides the strict
    trainer, and it overrides nothing but `__init__` (held-out evaluation and run files around TRL's own step)."""
    from training.step.plain_trl import PlainTRLGRPOTrainer

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


# ---- the house around the step: rooms, task folders, no import circles ------------------------------------------------
TASKS = ROOT / "training" / "tasks"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_imports(tree: ast.AST, type_checking: bool = False):
    """Every import a module can execute, function-local ones included; `if TYPE_CHECKING:` blocks only where
    `type_checking` (a circle through type hints is still two modules that each need the other)."""
    for node in ast.walk(tree):
        if not type_checking and isinstance(node, ast.If) and ast.unparse(node.test) in (
                "TYPE_CHECKING", "typing.TYPE_CHECKING"):
            node.body = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def _import_graph(type_checking: bool = False) -> dict[str, set[str]]:
    paths = {_module_name(p): p for p in (ROOT / "training").rglob("*.py")}
    graph = {}
    for name, path in paths.items():
        targets = set(_runtime_imports(ast.parse(path.read_text()), type_checking))
        graph[name] = {t for t in targets if t in paths and t != name and not name.startswith(t + ".")}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_cycle_through_a_function_local_import():
    tree = ast.parse("import a\ndef f():\n    from b import c\nif TYPE_CHECKING:\n    import d\n")
    assert set(_runtime_imports(tree)) == {"a", "b", "b.c"}
    tree = ast.parse("import a\ndef f():\n    from b import c\nif TYPE_CHECKING:\n    import d\n")
    assert set(_runtime_imports(tree, type_checking=True)) == {"a", "b", "b.c", "d"}
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_import_graph_under_training_has_no_circles_type_checking_imports_included():
    assert _cycles(_import_graph(type_checking=True)) == []


ENTRY_POINTS = {"training.train", "training.evaluate", "training.compare", "training.workflow"}


def test_no_library_module_imports_an_entry_point_command():
    """The commands sit on top: a module that is not itself run with `python -m` (no `__main__` block) never imports
    `training.train`, `evaluate`, `compare` or `workflow`; what they share lives in a library they import."""
    paths = {_module_name(p): p for p in (ROOT / "training").rglob("*.py")}
    commands = {n for n, p in paths.items() if '__name__ == "__main__"' in p.read_text()}
    offenders = {name: sorted(targets & ENTRY_POINTS) for name, targets in _import_graph(type_checking=True).items()
                 if name not in commands}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_generic_code_never_imports_a_task():
    """Tasks plug in through the one task registry, `training.run_setup.tasks` (entry points), never by being
    imported."""
    offenders = {
        name: sorted(t for t in targets if t.startswith("training.tasks."))
        for name, targets in _import_graph().items() if not name.startswith("training.tasks")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_training_has_few_top_level_modules_and_no_two_modules_share_a_name():
    top = sorted(p.name for p in (ROOT / "training").glob("*.py"))
    assert len(top) <= 8, top
    by_name: dict[str, list[Path]] = {}
    for path in (ROOT / "training").rglob("*.py"):
        if path.name != "__init__.py":
            by_name.setdefault(path.name, []).append(path)
    shared = {n: ps for n, ps in by_name.items() if len(ps) > 1}
    # the same kind of thing for different tasks (tasks/*/rewards.py) is the one exception
    assert {n: ps for n, ps in shared.items() if any(p.parent.parent != TASKS for p in ps)} == {}


def test_every_task_folder_is_one_entry_point_whose_task_module_registers_one_task():
    """Each folder under training/tasks/ is listed in `strict_grpo.tasks` under its name, as its `task.py`, and that
    module registers the one `Task` of that name (`load_tasks` refuses anything else)."""
    import tomllib

    from training.run_setup import tasks

    groups = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    folders = sorted(p.name for p in TASKS.iterdir() if (p / "__init__.py").exists())
    assert groups["strict_grpo.tasks"] == {name: f"training.tasks.{name}.task" for name in folders}
    assert [task.name for task in tasks.all()] == folders
    # the project's own group is one: reward names, tiny models, ... come with each Task; vLLM's plugin group holds
    # the one plugin (training/run_setup/vllm_plugin.py)
    assert set(groups) == {"strict_grpo.tasks", "vllm.general_plugins"}
    assert groups["vllm.general_plugins"] == {"strict_grpo": "training.run_setup.vllm_plugin:register"}


def _calls_to(tree: ast.AST, names: set[str]) -> list[str]:
    return [ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func) in names]


def test_a_task_registers_exactly_one_task_and_nothing_else_into_generic_registries():
    """The one registration a task makes is `register(Task(...))`, once, in its `task.py`; no other module calls the
    task registry's `register`, and no task module imports another generic registry's `register*` (a task's reward
    names, tiny models, tokenizer words, evaluation and metric names are fields of its `Task`). A task's own
    registries inside its folder (the causal surrogates and scripted policies) are its business."""
    generic_registers = {}
    for path in (ROOT / "training").rglob("*.py"):
        if TASKS in path.parents:
            continue
        tree = ast.parse(path.read_text())
        generic_registers[_module_name(path)] = {
            n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("register")}
    assert generic_registers["training.run_setup.tasks"] == {"register"}
    for path in sorted((ROOT / "training").rglob("*.py")):
        tree = ast.parse(path.read_text())
        imported = {(node.module, alias.name) for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                    for alias in node.names if node.module}
        foreign = {(m, n) for m, n in imported if n in generic_registers.get(m, ())}
        if path.name == "task.py" and path.parent.parent == TASKS:
            assert foreign == {("training.run_setup.tasks", "register")}, path
            registrations = [c for c in ast.walk(tree) if isinstance(c, ast.Call) and ast.unparse(c.func) == "register"]
            assert [ast.unparse(c.args[0].func) for c in registrations] == ["Task"], path
        elif TASKS in path.parents:
            assert foreign == set(), (path, foreign)
        else:  # generic code registers no task
            assert ("training.run_setup.tasks", "register") not in foreign, path
            assert not _calls_to(tree, {"tasks.register"}), path


# ---- the family of causal commands: one dialect ------------------------------------------------------------------------
def _functions(path: Path):
    return [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def test_no_function_under_training_is_longer_than_80_lines_and_the_environment_is_under_250():
    long = {f"{p.relative_to(ROOT)}:{f.name}": f.end_lineno - f.lineno + 1
            for p in (ROOT / "training").rglob("*.py") for f in _functions(p) if f.end_lineno - f.lineno + 1 > 80}
    assert long == {}
    assert len((TASKS / "causal" / "env.py").read_text().splitlines()) < 250


def test_no_class_is_made_at_run_time_with_type():
    """An environment's settings are its constructor's keyword arguments (training/run_setup/environment_settings.py),
    not class attributes of a subclass made with three-argument `type(...)`."""
    made = [f"{p.relative_to(ROOT)}:{n.lineno}" for p in (ROOT / "training").rglob("*.py")
            for n in ast.walk(ast.parse(p.read_text()))
            if isinstance(n, ast.Call) and ast.unparse(n.func) == "type" and len(n.args) == 3]
    assert made == []


SEED_RULE = ROOT / "training" / "evaluation" / "pairing_seeds.py"


def _seed_arithmetic(tree: ast.AST) -> list[str]:
    """Arithmetic with an operand named like a seed (`seed`, `row["seed"]`, `*_SEED_*`), and seeds drawn from a
    generator's integers."""
    def text(node) -> bool:  # a string, or a sum with one: concatenation, not arithmetic
        return (isinstance(node, ast.Constant) and isinstance(node.value, str)) or isinstance(node, ast.JoinedStr) or (
            isinstance(node, ast.BinOp) and (text(node.left) or text(node.right)))

    def seedlike(node) -> bool:
        return "seed" in ast.unparse(node).lower() and not any(isinstance(n, ast.Call) for n in ast.walk(node))

    found = [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.BinOp) and not text(n)
             and isinstance(n.op, (ast.Add, ast.Sub, ast.Mult, ast.Mod, ast.FloorDiv, ast.Pow))
             and (seedlike(n.left) or seedlike(n.right))]
    found += [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Call)
              and ast.unparse(n.func).endswith(".integers") and n.args and ast.unparse(n.args[0]) in ("2**63", "2 ** 63")]
    return found


def test_seed_arithmetic_lives_in_the_seed_rule_only():
    assert sorted(_seed_arithmetic(ast.parse("a = 1000 * row['seed'] + k\nb = rng.integers(2**63)\nc = seed % 4"))) == [
        "1000 * row['seed']", "1000 * row['seed'] + k", "rng.integers(2 ** 63)", "seed % 4"]
    paths = [*(ROOT / "training").rglob("*.py"), *(ROOT / "benchmarks").glob("*.py"), *(ROOT / "scripts").glob("*.py")]
    found = {str(p.relative_to(ROOT)): arithmetic for p in paths if p != SEED_RULE
             and (arithmetic := _seed_arithmetic(ast.parse(p.read_text())))}
    assert found == {}


CAUSAL_COMMANDS = ("training.evaluate", "training.compare", "training.tasks.causal.evaluate_baselines",
                   "training.tasks.causal.scm_rows", "training.tasks.causal.train_scm")


def _flags(command: str) -> set[str]:
    """The flags `--help` lists for a command (old spellings are hidden: they warn or refuse, naming the new one).
    The command runs in this process, as `python -m` runs it: a subprocess per command was five fresh imports of torch
    and TRL beside the other test workers, and once printed nothing in CI."""
    import contextlib
    import io
    import re
    import runpy
    import sys

    text, argv, code = io.StringIO(), sys.argv, None
    sys.argv = [command, "--help"]
    try:
        with contextlib.redirect_stdout(text):
            runpy.run_module(command, run_name="__main__")
    except SystemExit as stop:
        code = stop.code
    finally:
        sys.argv = argv
    assert code in (0, None), f"{command} --help exited {code}"
    heads = [re.split(r"\s{2,}", line.strip())[0] for line in text.getvalue().splitlines() if re.match(r"^\s{1,8}-", line)]
    return {flag for head in heads for flag in re.findall(r"--[\w-]+", head)}


def test_the_causal_commands_spell_each_flag_one_way_with_underscores():
    flags = {command: _flags(command) for command in CAUSAL_COMMANDS}
    assert all(flags.values())
    # TRL's parser (HfArgumentParser) takes `--foo-bar` as an alias of the field `--foo_bar`: one flag, two spellings
    dashed = {command: sorted(f for f in found if "-" in f[2:] and "--" + f[2:].replace("-", "_")
                              not in found) for command, found in flags.items()}
    assert {c: d for c, d in dashed.items() if d} == {}
    every = set().union(*flags.values())
    for old in ("--samples-per-prompt", "--max-rows", "--build-only", "--episodes", "--limit", "--train", "--heldout",
                "--versus", "--heldout_episodes", "--normality-alpha"):
        assert old not in every  # hidden: each says its new spelling
    for idea in ("--episodes_per_row", "--max_rows", "--heldout_seed", "--train_rows", "--heldout_rows", "--surrogate",
                 "--scm", "--split", "--budget", "--initial_samples", "--max_parents"):
        assert idea in every


def test_no_causal_command_builds_a_command_line_for_another():
    """Commands hand each other values in process (an `EvalRequest`, an `EpisodeSource`, a `Recipe`): no list of flag
    strings is built in a causal command, and none calls another's `main` with one."""
    modules = [ROOT / "training" / "evaluate.py", ROOT / "training" / "compare.py",
               *(TASKS / "causal").glob("*.py")]
    built = {}
    for path in modules:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.List, ast.Tuple)) and any(
                    isinstance(e, ast.Constant) and isinstance(e.value, str) and e.value.startswith("--")
                    for e in node.elts):
                built.setdefault(str(path.relative_to(ROOT)), []).append(ast.unparse(node)[:60])
    assert built == {}
