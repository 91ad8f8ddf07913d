"""The causal job's starting policy: an artefact built by one command from committed code and data, shipped in the
repository with its build record, and loaded by the causal recipe (`model_name_or_path: causal-starting-policy`), the
way a GPU user starts from a published checkpoint.

    python -m training.tasks.causal.starting_policy build --seed 0 --out models/causal_starting_policy
    python -m training.tasks.causal.starting_policy check models/causal_starting_policy    # acceptance, measured again
    python -m training.tasks.causal.starting_policy verify models/causal_starting_policy   # files against the record

What a build does:

1. The base: the offline tiny Qwen3 with the causal tokenizer (`tiny-qwen3-causal`, `model_seed`), of the shape
   `hidden_size`, `num_hidden_layers`, `num_attention_heads` (`tiny_model.causal_arch`; the defaults: `CAUSAL_ARCH`).
2. Traces, rendered as GRPO renders them (the recipe's chat template and `chat_template_kwargs`), with their decision
   tokens marked: every bundled train row (data/causal/train.jsonl) played `episodes_per_row` times by the teacher
   (`policies.belief_line.teacher`: the option listed last, the largest expected information gain; episode k on the
   paired environment seed `environment_seed(row, k)`, `policies.play.run_policy`). Episodes after the first rename
   the SCM's variables (`episode_row`: fresh names, half of them random identifiers, the rest in a drawn style of
   `scm.names`), the same SCM and the same calls under other names, and with `budget_spread` on a drawn budget.
   The teacher picks another listed option than its own in `other_option_share` of the calls that have one
   (`TeacherPolicy(other_share)`): a student of the rule alone was near-deterministic (sampled at temperature 1.0
   it made the rule's choice in 0.995 of its calls), so every GRPO group's episodes were alike and the first step's
   loss was 0; this one samples the options. An imitation-ceiling build (`imitated` "one_step") may write a working
   into each call's turn before the call (`working` "scores": each option's one-step score, `written_working`),
   learnt with the format tokens. With `additive_share` the last episodes of each row play the additive surrogate,
   whose replies list more options (a user's nonlinear file plays it).
3. Full fine-tuning (`training.run_setup.warm_start.fine_tune`) with the decision tokens' mean weighed apart from the
   format tokens' (`decision_weight`): with one mean over all label tokens of a trace, the few that decide were
   drowned, and the model learnt the format and guessed the choice (its loss sat at the loss of a model that picks
   at chance). `decisions` "calls_and_stops" counts each turn's choice between calling and stopping among them.
4. Acceptance (`acceptance`): greedy episodes on the first `acceptance_rows` held-out SCMs; the share of valid calls
   that make the teacher's choice (`CallTrace.follows_teacher`) must reach `acceptance_bar`, and so must the share of
   calls that are valid (a policy that miscopies a name makes a call the environment refuses). The same measure on
   sampled episodes (the recipe's temperature) is recorded beside it, with the share that make the one-step rule's
   choice and the share that repeat the previous call.
5. A rejected build is written to `<out>-rejected` (to look at) and the command exits 1; an accepted one to `<out>`,
   atomically, with `build_record.json`: the command, the commit, the data's and recipe's digests, the digest of the
   encoded traces (and of the first 16, which `verify` re-renders), the library versions and thread count, the
   settings and seed, the loss, the acceptance measurements and every file's sha256.

Nothing is cached: a build always trains (about 20 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import shutil
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from training.evaluation.episode_settings import EpisodeSettings
from training.evaluation.spec import spec_from_recipe
from training.evaluation.tool_loop import environment_tools, sampling_chat_template
from training.outputs.atomic import atomic_directory
from training.outputs.git_state import git_state
from training.evaluation.pairing_seeds import BUDGET_SEED_KEY, RENAME_SEED_KEY, generator
from training.run_setup.build_keys import numerics
from training.errors import BadInputError, bad_input_exits
from training.run_setup.models import cache_root
from training.run_setup.prompt_datasets import load_rows
from training.run_setup.warm_start import FineTuneSettings, encoded_digest, fine_tune
from training.run_setup.warm_start_tools import encode_messages, reference_trace, with_observation
from training.tasks.causal.env import CausalEnv
from training.tasks.causal.policies.belief_line import IMITABLE_RULES, teacher
from training.tasks.causal.policies.play import run_policy
from training.tasks.causal.policy_episodes import lm_episodes
from training.tasks.causal.episode_source import CAUSAL_RECIPE
from training.tasks.causal.scm import names
from training.tasks.causal.scm.scm import SCM
from training.tasks.causal.splits import DATA_DIR, renamed_as, scm_row
from training.tasks.causal.written_working import WORKINGS, WritingPolicy

REPO = Path(__file__).resolve().parents[3]
STARTING_POLICY_DIR = REPO / "models" / "causal_starting_policy"
STARTING_POLICY_NAME = "causal-starting-policy"  # what a recipe's model_name_or_path names it by (task.py)
BUILD_RECORD = "build_record.json"
DATA_FILES = (DATA_DIR / "train.jsonl", DATA_DIR / "heldout.jsonl")
VERIFIED_TRACES = 16  # traces `verify` renders again
DECISIONS = ("calls", "calls_and_stops")  # `BuildSettings.decisions`


@dataclass(frozen=True)
class BuildSettings:
    seed: int = 0  # the fine-tune's batches
    model_seed: int = 0  # the base tiny Qwen3's initialisation
    episodes_per_row: int = 8  # the teacher's episodes of each train row
    other_option_share: float = 0.3  # of the traces' calls with a choice: another option than the teacher's (see
    # `TeacherPolicy`): a student of the rule alone sampled it in 0.995 of its calls, every GRPO group alike
    steps: int = 1000
    lr: float = 3e-3
    warmup_steps: int = 50
    batch_size: int = 8
    decision_weight: float = 1.0
    acceptance_rows: int = 32
    acceptance_bar: float = 0.9  # of the greedy valid calls that make the teacher's choice, and of the calls valid
    device: str = "cpu"  # the fine-tune's and the acceptance episodes' torch device ("cuda" on a GPU machine)
    imitated: str = "teacher"  # whose choices the traces make (`policies.belief_line.IMITABLE_RULES`): the shipped
    # build imitates the teacher; "one_step" builds the imitation ceiling (the one-step rule, which GRPO never sees)
    hidden_size: int = 128  # the base's shape (`tiny_model.causal_arch`); the defaults are `CAUSAL_ARCH`
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    working: str = "none"  # what each call's turn writes before its call (`written_working.WORKINGS`): "scores",
    # the one-step rule's score of every option, only where the rule is imitated (the shipped policy never sees it)
    budget_spread: int = 0  # episodes after a row's first play a budget drawn from its own plus or minus this many
    # calls: trained on budgets of 6 alone, students ended CBO's longer episodes a call early, though every reply
    # says how many calls are left; this takes the conversation's length away as a cue (the ledger's §3.8: it did
    # not help)
    decisions: str = "calls"  # the tokens `decision_weight` weighs (`DECISIONS`): "calls_and_stops" adds each turn's
    # choice between calling and stopping (the first token of each turn's answer); with "calls" the shipped student
    # stopped at one call left in a quarter of CBO's episodes, where on the main job it never does
    additive_share: float = 0.0  # of each row's episodes, the last ones play the additive surrogate
    # (`additive_episodes`): the replies of a user's nonlinear file, which plays it, list 4 to 7 options a reply where
    # the exact surrogate's list 2, and a student of the exact surrogate's alone never saw them

    def __post_init__(self):
        if self.imitated not in IMITABLE_RULES:
            raise BadInputError(f"--imitated: one of {', '.join(IMITABLE_RULES)}, got {self.imitated!r}")
        if not 0 <= self.additive_share < 1:
            raise BadInputError(f"--additive_share: at least 0 and below 1 (episode 0 plays the exact surrogate), "
                                f"got {self.additive_share}")
        if self.decisions not in DECISIONS:
            raise BadInputError(f"--decisions: one of {', '.join(DECISIONS)}, got {self.decisions!r}")
        if self.working not in WORKINGS:
            raise BadInputError(f"--working: one of {', '.join(WORKINGS)}, got {self.working!r}")
        if self.working != "none" and self.imitated == "teacher":
            raise BadInputError(f"--working {self.working}: writes the one-step rule's scores, which the teacher's "
                                "student must never see; only with --imitated one_step")
        if self.budget_spread < 0 or self.budget_spread and self.budget_spread >= min(
                row["budget"] for row in load_rows(DATA_FILES[0])):
            raise BadInputError(f"--budget_spread: at least 0 and below every train row's budget (each episode "
                                f"keeps a call), got {self.budget_spread}")
        try:
            self.arch()
        except ValueError as error:
            raise BadInputError(f"--hidden_size / --num_attention_heads: {error}") from None

    def arch(self) -> dict:
        from training.tasks.causal.tiny_model import causal_arch

        return causal_arch(self.hidden_size, self.num_hidden_layers, self.num_attention_heads)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def episode_row(row: dict, k: int, budget_spread: int = 0) -> dict:
    """Episode k's row: the row itself for k = 0; after it, the row's SCM under fresh names (a random identifier per
    variable in every other episode, a drawn style of `scm.names` in the rest), its prompt rewritten with them, and
    with `budget_spread` a budget drawn from the row's plus or minus that many calls."""
    if k == 0:
        return row
    rng = generator(row["seed"], k, RENAME_SEED_KEY)
    style = "random" if k % 2 else names.STYLES[int(rng.integers(len(names.STYLES)))]
    scm = renamed_as(SCM.from_json(row["scm_json"]), rng, style)
    budget = row["budget"]
    if budget_spread:
        budget += int(generator(row["seed"], k, BUDGET_SEED_KEY).integers(-budget_spread, budget_spread + 1))
    return {**row, **scm_row(scm, seed=row["seed"], budget=budget, initial_samples=row["initial_samples"])}


def additive_episodes(episodes_per_row: int, share: float) -> int:
    """How many of a row's episodes, the last ones, play the additive surrogate."""
    return round(share * episodes_per_row)


def _play(job: tuple[dict, int, float, str, str, int, str]) -> list[dict]:
    """The conversation of the teacher's episode k of a row (a worker's job), with the surrogate named."""
    row, k, other_share, rule, working, budget_spread, surrogate = job
    row = episode_row(row, k, budget_spread)
    policy = WritingPolicy(teacher(other_share, rule), working)
    return trace_messages(row, run_policy(policy, row, k, surrogate), policy.workings)


def trace_messages(row: dict, record, texts: list[str] | None = None) -> list[dict]:
    """A played episode (`EpisodeTrace`) of `row` as the conversation the build trains on; `texts`: what each call's
    turn writes before its call (`written_working`)."""
    played = {**row, "reference_calls_json": json.dumps([{"name": s.tool, "arguments": s.arguments}
                                                         for s in record.steps])}
    return reference_trace(with_observation(played, record.reset_text), [s.outcome for s in record.steps], texts)


def play(rows: list[dict], episodes_per_row: int, show_progress: bool = False, other_share: float = 0.0,
         rule: str = "teacher", working: str = "none", budget_spread: int = 0,
         additive_share: float = 0.0) -> list[list[dict]]:
    """The teacher's episodes 0 .. episodes_per_row - 1 of every row (`teacher(other_share, rule)`, writing
    `working` before each call, episodes after the first on budgets `budget_spread` apart, the last
    `additive_episodes` of them with the additive surrogate), on every core, in order."""
    additive = episodes_per_row - additive_episodes(episodes_per_row, additive_share)
    jobs = [(row, k, other_share, rule, working, budget_spread, "additive" if k >= additive else "exact")
            for row in rows for k in range(episodes_per_row)]
    with multiprocessing.get_context("fork").Pool(os.cpu_count() or 1) as pool:
        return list(tqdm(pool.imap(_play, jobs, chunksize=8), total=len(jobs), desc="teacher episodes",
                         unit="episode", disable=not show_progress))


def encode_traces(tokenizer, traces: list[list[dict]], template_kwargs: dict, decisions: str = "calls") -> list[tuple]:
    """The traces encoded with their decision tokens (`DECISIONS`)."""
    template = sampling_chat_template(tokenizer)
    tools = list(environment_tools(CausalEnv()).values())
    return [encode_messages(tokenizer, messages, tools, template, template_kwargs, decisions=True,
                            stops=decisions == "calls_and_stops") for messages in traces]


RULES = ("follows_teacher", "follows_one_step")


def call_shares(records: list[dict]) -> dict[str, float]:
    """Over the records' valid calls: the shares that make the teacher's and the one-step rule's choice, and the
    share that repeat the previous call."""
    counts = dict.fromkeys(RULES, 0)
    repeated = valid = 0
    for record in records:
        previous = None
        for call in record["call_log"]:
            if not call["valid"]:
                continue
            setting = {k: v for k, v in call.items() if k not in ("valid", *RULES)}
            valid += 1
            for rule in RULES:
                counts[rule] += call[rule]
            repeated += setting == previous
            previous = setting
    return {"valid_calls": valid, **{rule: n / valid if valid else 0.0 for rule, n in counts.items()},
            "repeats": repeated / valid if valid else 0.0}


def acceptance(model, tokenizer, settings: BuildSettings, spec=None) -> dict:
    """Greedy (and, recorded beside, sampled) episodes of the model on the first `acceptance_rows` held-out SCMs:
    the share of valid calls that make the imitated rule's choice, and whether it reaches `acceptance_bar`."""
    spec = spec or spec_from_recipe(str(CAUSAL_RECIPE), build_model=False)
    rows = load_rows(DATA_FILES[1])[: settings.acceptance_rows]
    sampled_settings = EpisodeSettings.from_spec(replace(spec, samples_per_prompt=1, greedy=False))
    out = {"rows": len(rows)}
    for decoding, episode_settings in (("greedy", sampled_settings.greedy()), ("sampled", sampled_settings)):
        records = lm_episodes(model, tokenizer, rows, episode_settings, env_factory=CausalEnv,
                              policy=STARTING_POLICY_NAME)
        out[decoding] = {**call_shares(records),
                         "malformed_calls": float(np.mean([r["malformed_calls"] for r in records])),
                         "invalid_calls": float(np.mean([r["invalid_calls"] for r in records])),
                         "reward": float(np.mean([r["reward"] for r in records])),
                         "regret": float(np.mean([r["regret"] for r in records]))}
    greedy = out["greedy"]
    made = greedy["valid_calls"] + (greedy["invalid_calls"] + greedy["malformed_calls"]) * len(rows)
    greedy["valid_share"] = greedy["valid_calls"] / made if made else 0.0
    out["passed"] = min(greedy[f"follows_{settings.imitated}"], greedy["valid_share"]) >= settings.acceptance_bar
    return out


def device_name(device: str) -> dict:
    """The accelerator a non-CPU build ran on (its numerics differ from a CPU build's)."""
    return {} if device == "cpu" else {"device": torch.cuda.get_device_name(torch.device(device))}


def build(settings: BuildSettings, out: Path, command: str, show_progress: bool = True,
          overwrite: bool = False) -> dict:
    """Build, measure and write the starting policy (module docstring); returns the build record."""
    from training.tasks.causal.tiny_model import resolve_causal_model

    started, commit = time.time(), git_state()  # the code that runs is the code at the start
    base = resolve_causal_model(cache_root(), settings.model_seed, settings.arch())
    spec = spec_from_recipe(str(CAUSAL_RECIPE), build_model=False)
    from transformers import AutoTokenizer

    rows = load_rows(DATA_FILES[0])
    tokenizer = AutoTokenizer.from_pretrained(base)
    played = play(rows, settings.episodes_per_row, show_progress, settings.other_option_share, settings.imitated,
                  settings.working, settings.budget_spread, settings.additive_share)
    traces = encode_traces(tokenizer, played, spec.template_kwargs, settings.decisions)
    losses: dict[int, float] = {}
    fine = FineTuneSettings(steps=settings.steps, lr=settings.lr, batch_size=settings.batch_size, seed=settings.seed,
                            warmup_steps=min(settings.warmup_steps, settings.steps),
                            decision_weight=settings.decision_weight, device=settings.device)
    model, tokenizer, final_loss = fine_tune(base, traces, fine, show_progress, desc="starting policy",
                                             on_step=lambda s, loss: losses.update({s: loss}) if s % 50 == 0 else None)
    model.eval()
    with torch.no_grad():
        accepted = acceptance(model, tokenizer, settings, spec)
    record = {
        "command": command, **commit, "base_model": Path(base).name,
        "data": {str(p.relative_to(REPO)): sha256(p) for p in DATA_FILES},
        "recipe": {str(CAUSAL_RECIPE.relative_to(REPO)): sha256(CAUSAL_RECIPE)},
        "traces": {settings.imitated: len(traces), "digest": encoded_digest(traces),
                   "first_digest": encoded_digest(traces[:VERIFIED_TRACES])},
        "numerics": {**numerics(threads=True), **device_name(settings.device)}, "settings": asdict(settings),
        "training": {"final_loss": final_loss, "loss_every_50_steps": losses},
        "acceptance": accepted, "build_seconds": round(time.time() - started, 1),
    }
    dest = out if accepted["passed"] else out.with_name(out.name + "-rejected")
    write_build(dest, lambda tmp: (model.save_pretrained(tmp), tokenizer.save_pretrained(tmp)), record,
                overwrite=overwrite or not accepted["passed"])  # an earlier rejected build is no keepsake
    return record


def write_build(dest: Path, save, record: dict, overwrite: bool) -> None:
    """`save(tmp)` then the record (with every file's sha256), moved to `dest` in one rename. An existing `dest` is
    replaced only with `overwrite`, and only now, when the build is done (a failed build leaves it as it was)."""
    if dest.exists():
        if not overwrite:
            raise BadInputError(f"{dest} exists; pass --overwrite or another --out")
        shutil.rmtree(dest)
    with atomic_directory(dest) as tmp:
        save(tmp)
        record["files"] = {p.name: sha256(p) for p in sorted(tmp.iterdir()) if p.is_file()}
        (tmp / BUILD_RECORD).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    if json.loads((dest / BUILD_RECORD).read_text())["files"] != record["files"]:
        raise RuntimeError(f"{dest}: another process wrote it during the build; this build's files were discarded")


def verify(path: Path) -> list[str]:
    """What is wrong with a shipped starting policy, against its build record: files changed, data changed since the
    build, acceptance not passed, or the first traces no longer render as they did (the environment, the options,
    the template or the recipe's template arguments changed since). An empty list: nothing. The recipe's own digest is
    recorded but not compared: its training settings (steps, learning rate) do not change what the build made."""
    from transformers import AutoTokenizer

    record_path = path / BUILD_RECORD
    if not record_path.is_file():
        return [f"{record_path}: no build record"]
    record = json.loads(record_path.read_text())
    problems = []
    present = {p.name for p in path.iterdir() if p.is_file() and p.name != BUILD_RECORD}
    if present != set(record["files"]):
        problems.append(f"files {sorted(present)} differ from the record's {sorted(record['files'])}")
    problems += [f"{name}: sha256 differs from the build record" for name, digest in record["files"].items()
                 if (path / name).is_file() and sha256(path / name) != digest]
    for name, digest in record["data"].items():
        if sha256(REPO / name) != digest:
            problems.append(f"{name} changed since the build (sha256 differs); rebuild the starting policy")
    if not record["acceptance"]["passed"]:
        problems.append("the build did not pass its acceptance check")
    if not problems:
        settings = BuildSettings(**record["settings"])
        spec = spec_from_recipe(str(CAUSAL_RECIPE), build_model=False)
        rows = load_rows(DATA_FILES[0])[: -(-VERIFIED_TRACES // settings.episodes_per_row)]
        traces = play(rows, settings.episodes_per_row, other_share=settings.other_option_share,
                      rule=settings.imitated, working=settings.working,
                      budget_spread=settings.budget_spread,
                      additive_share=settings.additive_share)[:VERIFIED_TRACES]
        encoded = encode_traces(AutoTokenizer.from_pretrained(path), traces, spec.template_kwargs, settings.decisions)
        if encoded_digest(encoded) != record["traces"]["first_digest"]:
            problems.append(f"the first {VERIFIED_TRACES} traces render differently from the build's (the "
                            "environment, options, teacher or template changed); rebuild the starting policy")
    return problems


def resolve_starting_policy(cache: Path, seed: int) -> str:
    """`causal-starting-policy`: the shipped build (the seed is the build's own, in its record)."""
    if not (STARTING_POLICY_DIR / BUILD_RECORD).is_file():
        raise BadInputError(f"{STARTING_POLICY_NAME}: {STARTING_POLICY_DIR} has no {BUILD_RECORD}; build it with "
                            "python -m training.tasks.causal.starting_policy build --out models/causal_starting_policy")
    return str(STARTING_POLICY_DIR)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build, check or verify the causal job's starting policy.")
    sub = parser.add_subparsers(dest="what", required=True)
    build_parser = sub.add_parser("build", help="build from committed code and data (about 25 min on 2 cores)")
    defaults = BuildSettings()
    for name, value in asdict(defaults).items():
        build_parser.add_argument(f"--{name}", type=type(value), default=value)
    build_parser.add_argument("--out", default=str(STARTING_POLICY_DIR.relative_to(REPO)))
    build_parser.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    for name, text in (("check", "run the acceptance check again"), ("verify", "files against the build record")):
        sub_parser = sub.add_parser(name, help=text)
        sub_parser.add_argument("path", nargs="?", default=str(STARTING_POLICY_DIR))
        sub_parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    with bad_input_exits():
        if args.what == "build":
            out = Path(args.out)
            if out.exists() and not args.overwrite:
                raise BadInputError(f"--out: {out} exists; pass --overwrite or another --out")
            settings = BuildSettings(**{k: getattr(args, k) for k in asdict(defaults)})
            command = "python -m training.tasks.causal.starting_policy " + " ".join(argv or sys.argv[1:])
            record = build(settings, out, command, overwrite=args.overwrite)
            print(json.dumps({"out": str(out), "acceptance": record["acceptance"]}, indent=2))
            if not record["acceptance"]["passed"]:
                greedy = record["acceptance"]["greedy"]
                print(f"rejected: greedy calls made the {settings.imitated} rule's choice in "
                      f"{greedy[f'follows_{settings.imitated}']:.3f} of valid "
                      f"calls and were valid in {greedy['valid_share']:.3f} of calls (each must reach "
                      f"{settings.acceptance_bar}); written to {out}-rejected", file=sys.stderr)
                return 1
            return 0
        path = Path(args.path)
        if args.what == "verify":
            problems = verify(path)
            print("\n".join(problems) or f"{path}: matches its build record")
            return 1 if problems else 0
        from transformers import AutoModelForCausalLM, AutoTokenizer

        record = json.loads((path / BUILD_RECORD).read_text())
        model = AutoModelForCausalLM.from_pretrained(path).to(args.device).eval()
        with torch.no_grad():
            settings = BuildSettings(**{**record["settings"], "device": args.device})
            result = acceptance(model, AutoTokenizer.from_pretrained(path), settings)
        print(json.dumps(result, indent=2))
        return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
