"""A workflow YAML and the grid of runs (cells) it expands to: recipes x variants x sweep points x seeds.

    name: lr_sweep                        # also the trackers' project
    output_dir: runs/workflows/lr_sweep   # one directory per run under output_dir/runs/
    recipe: recipes/tiny_cpu.yaml         # the default recipe (a variant may name another)
    seeds: [0, 1, 2]
    heldout_seed: 0                       # heldout_seed of every run: all runs are scored on the same episodes
    overrides: {max_steps: 40}            # recipe keys set in every run
    grid: {learning_rate: [3.0e-4, 1.0e-3, 3.0e-3]}   # the sweep: every combination (cartesian product)
    variants:                             # named configurations (ablations), default {default: {}}
      grpo: {}
      no_format: {overrides: {reward_weights: [1.0, 0.0]}}
      plain_trl: {overrides: {trainer: trl}}
      warm_start: {evaluate_only: true}   # no training: the recipe's starting model, scored on the same episodes
      random: {evaluate_only: true, baseline: random}   # a task's scripted baseline (training.evaluate --baseline)
      again: {evaluate_only: true, adapter_of: grpo, overrides: {...}}  # grpo's run of each seed (its own model),
                                                      # evaluated again with these settings changed
    launcher: {accelerate_config: accelerate_configs/cpu.yaml, num_processes: 1, threads_per_run: 1}
    compare: {baseline: warm_start, alpha: 0.05, band: 0.05, window: 3}

A cell's recipe = the variant's recipe, then `overrides`, the variant's `overrides`, its sweep point, and finally
`seed` (and every key in `seed_keys`, e.g. `[model_seed]`: a warm start per seed), `heldout_seed`, `output_dir`,
`run_name` (the cell's name), `tracking_group` (its group) and `project`.
Names: `<variant>[_<key>=<value>...]-seed<N>`; the group is the name without `-seed<N>`. `evaluate_only` variants
run once (their `seeds`, when given, else the first seed; with `adapter_of`, every seed) and are not swept; an
`adapter_of` cell runs after the cell it evaluates.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from training.errors import BadInputError

TOP_KEYS = {"name", "description", "output_dir", "recipe", "seeds", "heldout_seed", "overrides", "grid", "variants",
            "launcher", "compare", "seed_keys"}
VARIANT_KEYS = {"recipe", "overrides", "seeds", "evaluate_only", "description", "baseline", "adapter_of"}
LAUNCHER_KEYS = {"accelerate_config", "num_processes", "threads_per_run"}
COMPARE_KEYS = {"baseline", "alpha", "band", "window", "normality_alpha", "metrics", "by"}
# Set by the workflow for every cell: a workflow may not override them.
RESERVED = {"seed", "heldout_seed", "output_dir", "run_name", "tracking_group"}


class WorkflowError(BadInputError):
    """A workflow file we cannot run; the message names the file and the field."""


@dataclass(frozen=True)
class Cell:
    index: int                     # 1-based, the `--only-run` number
    name: str
    group: str
    variant: str
    seed: int
    sweep: dict
    recipe_path: str
    recipe: dict                   # the resolved recipe written to <run_dir>/recipe.yaml
    evaluate_only: bool
    run_dir: Path
    baseline: str | None = None    # evaluate_only: the task's scripted baseline instead of a model
    adapter_dir: Path | None = None  # evaluate_only: the run whose model is evaluated (`adapter_of`, same seed)
    evaluate_overrides: dict = field(default_factory=dict)  # with adapter_dir: how that run's model is evaluated

    @property
    def config_hash(self) -> str:
        """Hash of the resolved recipe (and what is evaluated): a finished run is reused only when it was made with
        the same one."""
        what = {"recipe": self.recipe, "baseline": self.baseline,
                "adapter": None if self.adapter_dir is None else str(self.adapter_dir)}
        if self.baseline is None and self.adapter_dir is None:
            what = self.recipe  # as before these existed: earlier workflows' runs keep their hash
        return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def describe(self) -> str:
        sweep = ", ".join(f"{k} {v}" for k, v in self.sweep.items())
        return f"{self.variant} seed {self.seed}" + (f", {sweep}" if sweep else "")


@dataclass
class Workflow:
    path: Path
    name: str
    output_dir: Path
    cells: list[Cell]
    launcher: dict = field(default_factory=dict)
    compare: dict = field(default_factory=dict)
    description: str = ""


def _check_keys(source: str, where: str, mapping: dict, known: set[str]) -> None:
    if not isinstance(mapping, dict):
        raise WorkflowError(f"{source}: {where} must be a mapping, got {type(mapping).__name__}")
    for key in mapping:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=2)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise WorkflowError(f"{source}: unknown key {where + '.' if where else ''}{key}{hint}; known: "
                                f"{sorted(known)}")


def _no_reserved(source: str, where: str, mapping) -> None:
    if not isinstance(mapping, dict):
        raise WorkflowError(f"{source}: {where} must be a mapping of recipe keys, got {mapping!r}")
    reserved = sorted(RESERVED & set(mapping))
    if reserved:
        raise WorkflowError(f"{source}: {where} sets {reserved}, which the workflow sets for every run itself")


def _value_label(value) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list | tuple):
        return "-".join(_value_label(v) for v in value)
    return str(value)


def _read_recipe(source: str, path: str) -> dict:
    if not Path(path).exists():
        raise WorkflowError(f"{source}: recipe {path!r} does not exist")
    return yaml.safe_load(Path(path).read_text()) or {}


def load_workflow(path: str | Path, output_dir: str | None = None) -> Workflow:
    """Read and expand a workflow file; every problem is named with the file and the field."""
    path = Path(path)
    source = str(path)
    if not path.exists():
        raise WorkflowError(f"workflow file {source!r} does not exist")
    spec = yaml.safe_load(path.read_text()) or {}
    _check_keys(source, "", spec, TOP_KEYS)
    for required in ("name", "recipe", "seeds"):
        if required not in spec:
            raise WorkflowError(f"{source}: missing key {required!r}")
    name = str(spec["name"])
    seeds = spec["seeds"]
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) for s in seeds):
        raise WorkflowError(f"{source}: seeds must be a non-empty list of integers, got {seeds!r}")
    out = Path(output_dir or spec.get("output_dir") or f"runs/workflows/{name}")
    overrides = spec.get("overrides") or {}
    _no_reserved(source, "overrides", overrides)
    grid = spec.get("grid") or {}
    if not isinstance(grid, dict) or any(not isinstance(v, list) or not v for v in grid.values()):
        raise WorkflowError(f"{source}: grid must map recipe keys to non-empty lists of values, got {grid!r}")
    reserved = RESERVED & set(grid)
    if reserved:
        raise WorkflowError(f"{source}: grid sets {sorted(reserved)}, which the workflow sets itself")
    variants = spec.get("variants") or {"default": {}}
    if not isinstance(variants, dict):
        raise WorkflowError(f"{source}: variants must map variant names to settings, got {variants!r}")
    launcher = spec.get("launcher") or {}
    _check_keys(source, "launcher", launcher, LAUNCHER_KEYS)
    compare = spec.get("compare") or {}
    _check_keys(source, "compare", compare, COMPARE_KEYS)

    seed_keys = spec.get("seed_keys") or []
    if not isinstance(seed_keys, list) or not all(isinstance(k, str) for k in seed_keys):
        raise WorkflowError(f"{source}: seed_keys must be a list of recipe keys, got {seed_keys!r}")
    if RESERVED & set(seed_keys):
        raise WorkflowError(f"{source}: seed_keys sets {sorted(RESERVED & set(seed_keys))}, which the workflow sets "
                            "itself")
    for variant, vspec in variants.items():
        _check_evaluated(source, variant, vspec or {}, variants, bool(grid))

    cells: list[Cell] = []
    for variant, vspec in variants.items():
        vspec = vspec or {}
        voverrides = vspec.get("overrides") or {}
        _no_reserved(source, f"variants.{variant}.overrides", voverrides)
        recipe_path = vspec.get("recipe", spec["recipe"])
        base = _read_recipe(source, recipe_path)
        evaluate_only = bool(vspec.get("evaluate_only", False))
        adapter_of = vspec.get("adapter_of")
        vseeds = vspec.get("seeds", seeds[:1] if evaluate_only and adapter_of is None else seeds)
        points = [{}] if evaluate_only or not grid else [
            dict(zip(grid, values, strict=True)) for values in itertools.product(*grid.values())
        ]
        for point in points:
            group = variant + "".join(f"_{k}={_value_label(v)}" for k, v in point.items())
            for seed in vseeds:
                cell_name = f"{group}-seed{seed}"
                run_dir = out / "runs" / cell_name
                recipe = {**base, **overrides, **voverrides, **point}
                recipe.update({key: seed for key in seed_keys})
                recipe.update(
                    seed=seed, heldout_seed=int(spec.get("heldout_seed", 0)), output_dir=str(run_dir),
                    run_name=cell_name, tracking_group=group,
                )
                recipe.setdefault("project", name)
                adapter_dir = None if adapter_of is None else out / "runs" / f"{adapter_of}-seed{seed}"
                cells.append(Cell(len(cells) + 1, cell_name, group, variant, seed, point, recipe_path, recipe,
                                  evaluate_only, run_dir, vspec.get("baseline"), adapter_dir,
                                  dict(voverrides) if adapter_dir is not None else {}))
    groups = {c.group for c in cells}
    if compare.get("baseline") is not None and compare["baseline"] not in groups:
        raise WorkflowError(f"{source}: compare.baseline {compare['baseline']!r} is not a group of this workflow "
                            f"({sorted(groups)})")
    names = [c.name for c in cells]
    if len(set(names)) != len(names):
        raise WorkflowError(f"{source}: two cells share a name: {sorted({n for n in names if names.count(n) > 1})}")
    return Workflow(path, name, out, cells, launcher, compare, str(spec.get("description", "")))


def _check_evaluated(source: str, variant: str, vspec: dict, variants: dict, swept: bool) -> None:
    """`baseline` and `adapter_of` are for evaluate_only variants; `adapter_of` names a trained variant with a run
    for each of this variant's seeds."""
    _check_keys(source, f"variants.{variant}", vspec, VARIANT_KEYS)
    where = f"{source}: variants.{variant}"
    for key in ("baseline", "adapter_of"):
        if vspec.get(key) is not None and not vspec.get("evaluate_only"):
            raise WorkflowError(f"{where}.{key} needs evaluate_only: true")
    if vspec.get("baseline") is not None and vspec.get("adapter_of") is not None:
        raise WorkflowError(f"{where}: give baseline or adapter_of, not both")
    source_variant = vspec.get("adapter_of")
    if source_variant is None:
        return
    other = variants.get(source_variant)
    if other is None or (other or {}).get("evaluate_only"):
        raise WorkflowError(f"{where}.adapter_of: {source_variant!r} is not a trained variant of this workflow "
                            f"({sorted(v for v, s in variants.items() if not (s or {}).get('evaluate_only'))})")
    if swept:
        raise WorkflowError(f"{where}.adapter_of: a swept workflow has several runs per seed; name one recipe")
    if vspec.get("seeds") is not None and (other or {}).get("seeds") is not None and \
            set(vspec["seeds"]) - set(other["seeds"]):
        raise WorkflowError(f"{where}.seeds: {source_variant!r} has no run for seeds "
                            f"{sorted(set(vspec['seeds']) - set(other['seeds']))}")


def check_recipe_keys(workflow: Workflow) -> None:
    """Every key of every cell's recipe must be one `training.train` knows (checked before anything runs)."""
    from training.run_setup.recipe import make_parser

    known = {action.dest for action in make_parser()._actions} | {"env"}
    for cell in workflow.cells:
        for key in cell.recipe:
            if key not in known:
                close = difflib.get_close_matches(key, known, n=2)
                hint = f" (did you mean {', '.join(close)}?)" if close else ""
                raise WorkflowError(f"{workflow.path}: run {cell.name}: unknown recipe key {key!r}{hint}")
