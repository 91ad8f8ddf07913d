"""Evaluate a causal policy on any rows or a user's SCM file: an evaluation directory, a summary to stdout.

    python -m training.tasks.causal.evaluate_policy --model RUN_DIR --split heldout --episodes 4 --out eval/trained
    python -m training.tasks.causal.evaluate_policy --baseline greedy_eig --split heldout --episodes 4 --out eval/greedy
    python -m training.tasks.causal.evaluate_policy --model RUN_DIR --frozen --out eval/frozen
    python -m training.tasks.causal.evaluate_policy --model RUN_DIR --scm my_scm.yaml --budget 6 --episodes 20 \
        --surrogate additive --out eval/my_scm

The causal front end of the one evaluation pipeline: the same episodes (`policy_episodes`, the one tool loop of
training/evaluation/tool_loop.py), the same records and the same evaluation directory (`eval.jsonl`,
`eval_summary.json`: `evaluation_task.write_evaluation`) as `python -m training.evaluate`, which evaluates a run or a
recipe on its own held-out rows; this command takes the episodes from elsewhere. `python -m training.compare` and
`python -m training.tasks.causal.results` read its directories.

`--model` is a model directory (the tiny Qwen3, a warm start), a LoRA run's output directory (its adapter is loaded
on the base named in `adapter_config.json`), or a name `training.run_setup.models.resolve_model_path` knows;
`--adapter` names a LoRA adapter explicitly. The episodes: `--split` (train, heldout, a JSONL file of rows, or an SCM
file) or `--scm FILE` (a user's SCM, `training.tasks.causal.scm.user_scm`; episode k of it is the k-th paired
episode), with `--budget` and `--initial_samples` replacing the rows' (`training.tasks.causal.scm_rows.split_rows`),
and `--surrogate` (exact, the linear-Gaussian one, by default; additive for nonlinear mechanisms). The sampling
settings and length limits come from the recipe (`--recipe`, default the checkout's recipes/causal_cpu.yaml,
whatever the working directory), read as training reads it: temperature, top_p, top_k, max_completion_length,
max_tool_calling_iterations, max_tool_calls_per_episode, chat_template_kwargs, and the weights of its reward
functions by name. LM episodes are sampled (`--decoding sampled`, the training temperature, each episode from its
own stream under `--seed`) or greedy. Episode k of every row uses the same environment seed for every policy
(paired). `--frozen` freezes the surrogate (`make_causal_env(active=False)`: the posterior never updates after
reset).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

from training.evaluation.episode_settings import EpisodeSettings
from training.evaluation.spec import load_policy, spec_from_recipe
from training.outputs import run_files
from training.errors import BadInputError, bad_input_exits
from training.tasks.causal.env import make_causal_env
from training.tasks.causal.evaluation_task import component_weights, write_evaluation
from training.tasks.causal.policies.policy_catalogue import POLICIES
from training.tasks.causal.policy_episodes import baseline_episodes, lm_episodes, supported_policies
from training.tasks.causal.results import summary_table
from training.tasks.causal.scm_rows import CAUSAL_RECIPE, add_episode_source_arguments, episode_source


def policy_paths(model: str, adapter: str | None) -> tuple[str, str | None]:
    """(base model path, adapter) for `--model` / `--adapter`: a LoRA run's directory names its own base."""
    from training.run_setup.models import resolve_model_path

    path = Path(model)
    if adapter is None and (path / "adapter_config.json").exists():
        return json.loads((path / "adapter_config.json").read_text())["base_model_name_or_path"], str(path)
    return resolve_model_path(model), adapter


def main(argv: list[str] | None = None) -> list[dict]:
    with bad_input_exits():
        return evaluate(argv)


def evaluate(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description="Evaluate a causal policy (an LM or a baseline) on a split.")
    who = parser.add_mutually_exclusive_group(required=True)
    who.add_argument("--model", help="model dir, LoRA run dir, or model name")
    who.add_argument("--baseline", choices=list(POLICIES))
    parser.add_argument("--adapter", default=None, help="LoRA adapter dir (default: --model's own, if it has one)")
    add_episode_source_arguments(parser, episodes=4)
    parser.add_argument("--out", required=True, help="evaluation directory: eval.jsonl and eval_summary.json")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing eval.jsonl in --out")
    parser.add_argument("--recipe", default=str(CAUSAL_RECIPE), help="sampling settings and limits")
    parser.add_argument("--decoding", choices=["sampled", "greedy"], default="sampled")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sampled episodes (each its own stream under it)")
    parser.add_argument("--frozen", action="store_true", help="freeze the surrogate (no update after reset)")
    parser.add_argument("--label", default=None, help="policy name in the records")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)

    if (Path(args.out) / run_files.EVAL).exists() and not args.overwrite:
        raise BadInputError(f"--out: {args.out} already holds an eval.jsonl; pass --overwrite or another --out")
    rows, source = episode_source(args)
    if not Path(args.recipe).expanduser().is_file():
        raise BadInputError(f"--recipe: {args.recipe!r} is not a file")
    spec = spec_from_recipe(str(Path(args.recipe).expanduser()), build_model=False)  # read as training reads it
    weights = component_weights(spec)
    env_factory = make_causal_env(args.surrogate, active=not args.frozen)
    started = time.time()
    if args.baseline:
        label, decoding, evaluated = args.label or args.baseline, "policy", {"baseline": args.baseline}
        if args.frozen:
            raise BadInputError("--frozen applies to LM policies (the baselines read the live surrogate)")
        supported_policies(args.baseline, args.surrogate)
        records = baseline_episodes(args.baseline, rows, args.episodes, args.surrogate, weights=weights)
    else:
        unprompted = [i for i, r in enumerate(rows) if not r.get("prompt")]
        if unprompted:
            raise BadInputError(f"{source}: row {unprompted[0]} has no 'prompt', which a language model reads; write "
                                "rows with prompts by python -m training.tasks.causal.scm_rows, or pass --scm FILE")
        model_path, adapter = policy_paths(args.model, args.adapter)
        model, tokenizer = load_policy(replace(spec, model_path=model_path, adapter=adapter))
        label, decoding, evaluated = args.label or args.model, args.decoding, {"model_path": model_path,
                                                                               "adapter": adapter}
        settings = EpisodeSettings.from_spec(replace(spec, samples_per_prompt=args.episodes, eval_seed=args.seed))
        if decoding == "greedy":
            settings = settings.greedy(args.episodes)
        records = lm_episodes(model, tokenizer, rows, settings, env_factory=env_factory, policy=label,
                              weights=weights)
    for r in records:
        r.update(decoding=decoding, surrogate="frozen" if args.frozen else "active", surrogate_kind=args.surrogate,
                 split=source)
    write_evaluation(args.out, records, args.seed, {
        "source": "training.tasks.causal.evaluate_policy", **evaluated, "split": source, "decoding": decoding,
        "eval_seed": args.seed, "wall_time_s": time.time() - started,
    })
    print(f"{label}: {len(rows)} rows x {args.episodes} episodes of {source}, {args.surrogate} surrogate, "
          f"{time.time() - started:.0f}s; mean ± std over episodes -> {args.out}")
    print(summary_table([(label if args.baseline else f"{label} ({decoding})", records)]))
    return records


if __name__ == "__main__":
    main(sys.argv[1:])
