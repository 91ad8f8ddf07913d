"""Publishing a finished run to the Hugging Face Hub: the LoRA adapter (optionally merged weights), the tokenizer and
a generated model card (base model, recipe, strict flags, final metrics, reward curve).

Transformers' Trainer pushes by itself when `push_to_hub` is set (it creates the repo at start-up and uploads at
every save), and it pickles its arguments, token included, into `training_args.bin`. So `take_push_request` takes
the push settings and the token out of the training arguments before the trainer exists; after training,
`publish` stages exactly the files to upload into one folder (`--push_dry_run DIR` stops there, without touching the
network) and uploads that folder through `huggingface_hub.HfApi`. Before anything leaves, every staged file is
checked for the token. The token is taken out of the arguments whether or not a push is asked for, so it is never
pickled into `training_args.bin`.

Nothing staged names a path of the machine that trained: the base model is named by its hub id, as the locally built
tiny Qwen3 (rebuilt by the recipe), or by a local directory's name; `adapter_config.json`'s `base_model_name_or_path`
is rewritten so; the output, push, cache, working and home directories in the card, the recipe and
`run_summary.json` are replaced by placeholders (`<output_dir>`, `<push_dir>`, `<cache>`, `.`, `~`), and staging is
refused when any staged file still holds one of them.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from huggingface_hub import HfApi, ModelCard, ModelCardData, get_token

from training.outputs import run_files
from training.outputs.run_summary import read_metrics
from training.errors import BadInputError

logger = logging.getLogger(__name__)

ADAPTER_FILES = ("adapter_model.safetensors", "adapter_config.json")
OPTIONAL_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "generation_config.json",
    run_files.REWARD_CURVE,
    run_files.RUN_SUMMARY,
    run_files.METRICS,
)
CARD_METRICS = ("reward", "reward_std", "loss", "kl", "frac_reward_zero_std", "grad_norm")
REDACTED = "<redacted>"
MIN_SECRET_LEN = 8  # shorter strings would match by chance; real Hub tokens are far longer


class HubPushError(BadInputError):
    """The push cannot go ahead: a missing setting or file, or a staged file that would leak the token."""


@dataclass(frozen=True)
class PushRequest:
    """What to publish and where. `token` is None when huggingface_hub should find it (HF_TOKEN, a stored login)."""

    repo_id: str | None
    dry_run_dir: str | None
    merged: bool
    private: bool | None
    token: str | None = field(default=None, repr=False)

    @property
    def dry_run(self) -> bool:
        return self.dry_run_dir is not None

    def secrets(self) -> list[str]:
        """Every token this push could know about, to make sure none is written into a staged file."""
        found = {self.token, get_token()}
        return sorted(s for s in found if s and len(s) >= MIN_SECRET_LEN)


@dataclass(frozen=True)
class RunInfo:
    """What the model card says about the run."""

    base_model: str
    resolved_model_path: str
    recipe_path: str | None
    argv: list[str]
    strict_flags: dict[str, str]
    summary: dict

    def base_model_name(self) -> str:
        """How an upload names the base model: its hub id, `tiny-qwen3`, or a local directory's name."""
        if _is_hub_id(self.base_model) or self.base_model == "tiny-qwen3":
            return self.base_model
        return Path(self.base_model).resolve().name

    def base_model_text(self) -> str:
        """What the base model is, for the card."""
        if _is_hub_id(self.base_model):
            return "on the Hugging Face Hub"
        if self.base_model == "tiny-qwen3":
            seed = self.summary.get("script_args", {}).get("model_seed", 0)
            return (
                f"a locally built tiny Qwen3 (`training/run_setup/tiny_qwen3.py`, `model_seed` {seed}), not on the Hub; the "
                "recipe below builds it again"
            )
        return "a local model directory (named here by its directory name), not on the Hub"


def take_push_request(args) -> PushRequest | None:
    """Move the push settings out of `args` (a StrictGRPOConfig) so the Trainer neither pushes nor stores the token.

    Returns None when neither `push_to_hub` nor `push_dry_run` is set.
    """
    if not args.push_to_hub and not args.push_dry_run:
        if args.push_merged_weights:
            raise HubPushError("push_merged_weights=True needs --push_to_hub or --push_dry_run DIR")
        args.hub_token = None  # a token given without a push is never used: it must not be pickled either
        return None
    if args.push_to_hub and not args.push_dry_run and not args.hub_model_id:
        raise HubPushError("--push_to_hub needs --hub_model_id (the repository to upload to, e.g. me/qwen3-grpo)")
    if args.push_dry_run and Path(args.push_dry_run).exists() and any(Path(args.push_dry_run).iterdir()):
        raise HubPushError(f"--push_dry_run {args.push_dry_run!r} is not empty; choose an empty or new directory")
    request = PushRequest(
        repo_id=args.hub_model_id,
        dry_run_dir=args.push_dry_run,
        merged=args.push_merged_weights,
        private=args.hub_private_repo,
        token=args.hub_token,
    )
    args.push_to_hub = False
    args.hub_token = None
    return request


def redact_argv(argv: list[str]) -> list[str]:
    """The command line with the value of every `--*_token` option replaced."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
        elif arg.startswith("--") and arg.split("=", 1)[0].endswith("_token"):
            if "=" in arg:
                out.append(arg.split("=", 1)[0] + "=" + REDACTED)
            else:
                out.append(arg)
                hide_next = True
        else:
            out.append(arg)
    return out


def redacted_recipe(recipe_path: str | None) -> str | None:
    """The recipe's YAML with every `*_token` key's value replaced; None without a recipe."""
    if recipe_path is None:
        return None
    recipe = yaml.safe_load(Path(recipe_path).read_text()) or {}
    for key in recipe:
        if key.endswith("_token"):
            recipe[key] = REDACTED
    return yaml.safe_dump(recipe, sort_keys=False)


def final_metrics(output_dir: str | Path) -> dict[str, float]:
    """The last training-step values of the card's metrics (from metrics.jsonl)."""
    steps = [row for row in read_metrics(output_dir) if "loss" in row]
    if not steps:
        raise HubPushError(f"{output_dir}/metrics.jsonl has no training step: nothing trained, nothing to publish")
    last = steps[-1]
    return {"step": last["step"], **{name: last[name] for name in CARD_METRICS if name in last}}


def reward_points(output_dir: str | Path, max_points: int = 12) -> list[tuple[int, float]]:
    """Up to `max_points` evenly spaced (step, train reward) pairs, first and last included."""
    rows = [(row["step"], row["reward"]) for row in read_metrics(output_dir) if "reward" in row and "loss" in row]
    if len(rows) <= max_points:
        return rows
    picks = sorted({round(i * (len(rows) - 1) / (max_points - 1)) for i in range(max_points)})
    return [rows[i] for i in picks]


def _is_hub_id(name: str) -> bool:
    return "/" in name and not Path(name).exists() and not name.startswith((".", "/"))


def render_model_card(
    run: RunInfo, request: PushRequest | None, output_dir: str | Path, merged: bool, title: str | None = None
) -> ModelCard:
    """The README.md of the uploaded repository (and of the output directory, with `request` None)."""
    summary = run.summary
    metrics = final_metrics(output_dir)
    repo_id = request.repo_id if request is not None else None
    data = ModelCardData(
        base_model=run.base_model if _is_hub_id(run.base_model) else None,
        library_name="peft",
        pipeline_tag="text-generation",
        tags=["strict-grpo", "grpo", "trl", "lora", *(["merged"] if merged else [])],
    )
    lines = [
        f"# {title or repo_id or Path(str(output_dir)).name}",
        "",
        "A LoRA adapter trained with GRPO by the strict GRPO stack (TRL "
        f"{summary.get('library_versions', {}).get('trl', '?')}, PEFT "
        f"{summary.get('library_versions', {}).get('peft', '?')}).",
        "",
        "## Base model",
        "",
        f"- `model_name_or_path`: `{run.base_model_name()}`: {run.base_model_text()}",
    ]
    warm = summary.get("script_args", {}).get("warm_start_steps", 0)
    if warm:
        lines.append(
            f"- a supervised warm start of {warm} steps preceded GRPO, so the adapter alone does not reproduce the "
            "run on the original base model" + (": use the merged weights in `merged/`" if merged else "")
        )
    if merged:
        lines.append("- `merged/`: the base model with this adapter merged in (full weights)")
    lines += ["", "## Strict flags", "", "| flag | value |", "| --- | --- |"]
    lines += [f"| `{name}` | `{value}` |" for name, value in run.strict_flags.items()]
    lines += ["", f"## Final metrics (step {metrics['step']})", "", "| metric | value |", "| --- | --- |"]
    lines += [f"| `{name}` | {value:.4g} |" for name, value in metrics.items() if name != "step"]
    for key in ("heldout_reward_before", "heldout_reward_after"):
        if summary.get(key) is not None:
            lines.append(f"| `{key}` | {summary[key]:.4g} |")
    lines += [
        f"| `global_step` | {summary.get('global_step')} |",
        f"| `stopped_reason` | {summary.get('stopped_reason')} |",
    ]
    lines += ["", "## Reward curve", ""]
    if (Path(output_dir) / run_files.REWARD_CURVE).exists():
        lines += ["![reward curve](reward_curve.png)", ""]
    lines += ["| step | train reward |", "| --- | --- |"]
    lines += [f"| {step} | {reward:.4g} |" for step, reward in reward_points(output_dir)]
    lines += ["", "## Recipe", ""]
    recipe = redacted_recipe(run.recipe_path)
    if recipe is not None:
        lines += [f"`{run.recipe_path}`:", "", "```yaml", recipe.rstrip(), "```", ""]
    lines += ["Command line:", "", "```", " ".join(redact_argv(run.argv)), "```", ""]
    return ModelCard(f"---\n{data.to_yaml()}\n---\n\n" + "\n".join(lines))


def write_merged_weights(adapter_dir: Path, base_model_path: str, out: Path, dtype: str | None) -> None:
    """The base model (loaded unquantised) with the adapter from `adapter_dir` merged in, saved to `out`."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    torch_dtype = getattr(torch, dtype) if dtype and dtype != "auto" else None
    base = AutoModelForCausalLM.from_pretrained(base_model_path, dtype=torch_dtype)
    merged = PeftModel.from_pretrained(base, str(adapter_dir)).merge_and_unload()
    merged.save_pretrained(out)


class LocalPaths:
    """The machine's paths a run knows of, longest first, with the placeholder each becomes in what is published."""

    def __init__(self, output_dir: str | Path, stage: Path | None = None, extra: dict[str, str] | None = None):
        from training.run_setup.models import cache_root

        named = {
            str(Path(output_dir).resolve()): "<output_dir>",
            str(Path(output_dir)): "<output_dir>",
            str(cache_root().resolve()): "<cache>",
            str(Path.cwd().resolve()): ".",
            str(Path.home().resolve()): "~",
        }
        for path, hole in (extra or {}).items():
            named[path] = hole
            if os.path.exists(path):
                named[str(Path(path).resolve())] = hole
        if stage is not None:
            named[str(stage.resolve())] = "<push_dir>"
            named[str(stage)] = "<push_dir>"
        self.pairs = sorted(
            ((path, hole) for path, hole in named.items() if os.path.isabs(path) and path != os.sep),
            key=lambda pair: -len(pair[0]),
        )

    def scrub(self, text: str) -> str:
        for path, hole in self.pairs:
            text = text.replace(path, hole)
        return text

    def scrub_json(self, value):
        if isinstance(value, str):
            return self.scrub(value)
        if isinstance(value, list):
            return [self.scrub_json(v) for v in value]
        if isinstance(value, dict):
            return {self.scrub(str(k)): self.scrub_json(v) for k, v in value.items()}
        return value

    def check(self, folder: Path) -> None:
        """Raise naming the file when any file under `folder` holds one of the paths (bytes, any file type)."""
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            content = path.read_bytes()
            for local, _ in self.pairs:
                if local.encode() in content:
                    raise HubPushError(f"{path} contains the local path {local!r}; refusing to publish it")


def _model_paths(run: RunInfo) -> dict[str, str]:
    hole = f"<{run.base_model_name()}>"
    return {run.resolved_model_path: hole, run.base_model: hole}


def _stage_scrubbed(src: Path, dest: Path, paths: LocalPaths, run: RunInfo) -> None:
    """Copy one output file into the stage, with the machine's paths replaced in the text files."""
    if src.name == "adapter_config.json":
        config = json.loads(src.read_text())
        config["base_model_name_or_path"] = run.base_model_name()
        dest.write_text(json.dumps(paths.scrub_json(config), indent=2, sort_keys=True))
    elif src.suffix in (".json", ".jsonl", ".md", ".yaml", ".txt", ".jinja"):
        dest.write_text(paths.scrub(src.read_text(encoding="utf-8")), encoding="utf-8")
    else:
        shutil.copy2(src, dest)


def stage_upload(request: PushRequest, run: RunInfo, output_dir: str | Path, stage: Path, dtype: str | None) -> Path:
    """Write into `stage` exactly the files to upload; refuse if any of them contains the token or a local path."""
    output_dir = Path(output_dir)
    missing = [name for name in ADAPTER_FILES if not (output_dir / name).exists()]
    if missing:
        raise HubPushError(f"{output_dir} has no {', '.join(missing)}: the adapter was not saved, nothing to publish")
    if stage.exists() and any(stage.iterdir()):
        raise HubPushError(f"push staging directory {str(stage)!r} is not empty; choose an empty or new directory")
    stage.mkdir(parents=True, exist_ok=True)
    paths = LocalPaths(output_dir, stage, _model_paths(run))
    for name in ADAPTER_FILES + OPTIONAL_FILES:
        if (output_dir / name).exists():
            _stage_scrubbed(output_dir / name, stage / name, paths, run)
    recipe = redacted_recipe(run.recipe_path)
    if recipe is not None:
        (stage / "recipe.yaml").write_text(paths.scrub(recipe))
    if request.merged:
        write_merged_weights(output_dir, run.resolved_model_path, stage / "merged", dtype)
    card = render_model_card(run, request, output_dir, merged=request.merged)
    (stage / "README.md").write_text(paths.scrub(str(card)), encoding="utf-8")
    check_no_secret(stage, request.secrets())
    paths.check(stage)
    return stage


def write_local_model_card(run: RunInfo, output_dir: str | Path) -> Path | None:
    """Replace the card TRL and PEFT leave in `output_dir` (base model "[None]", cache paths) by ours, with the
    machine's paths replaced. None (and TRL's card left) when no training step was logged."""
    output_dir = Path(output_dir)
    try:
        card = render_model_card(run, None, output_dir, merged=False, title=output_dir.name)
    except HubPushError as err:
        logger.warning("No model card written: %s", err)
        return None
    paths = LocalPaths(output_dir, None, _model_paths(run))
    path = output_dir / "README.md"
    path.write_text(paths.scrub(str(card)), encoding="utf-8")
    return path


def check_no_secret(folder: Path, secrets: list[str]) -> None:
    """Raise naming the file when any file under `folder` contains one of `secrets` (bytes, any file type)."""
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        content = path.read_bytes()
        for secret in secrets:
            if secret.encode() in content:
                raise HubPushError(f"{path} contains the Hub token; refusing to publish (remove it from that file)")


def _listing(stage: Path) -> list[str]:
    return sorted(str(p.relative_to(stage)) for p in stage.rglob("*") if p.is_file())


def publish(request: PushRequest, run: RunInfo, output_dir: str | Path, dtype: str | None = None) -> dict:
    """Stage the upload; on a dry run stop there, else upload the staged folder. Returns what was done."""
    if request.dry_run:
        stage = stage_upload(request, run, output_dir, Path(request.dry_run_dir), dtype)
        logger.info("Push dry run: the %d files that would be uploaded are in %s", len(_listing(stage)), stage)
        return {"dry_run": True, "folder": str(stage), "files": _listing(stage)}
    with tempfile.TemporaryDirectory(prefix="strict-grpo-push-") as tmp:
        stage = stage_upload(request, run, output_dir, Path(tmp) / "upload", dtype)
        return _upload(request, run, stage)


def _upload(request: PushRequest, run: RunInfo, stage: Path) -> dict:
    files = _listing(stage)
    api = HfApi(token=request.token)
    repo = api.create_repo(request.repo_id, private=request.private, exist_ok=True, repo_type="model")
    commit = api.upload_folder(
        repo_id=request.repo_id,
        folder_path=str(stage),
        repo_type="model",
        commit_message=f"strict-grpo: step {run.summary.get('global_step')}",
    )
    logger.info("Pushed %d files to %s (%s)", len(files), request.repo_id, commit.commit_url)
    return {"dry_run": False, "repo_url": str(repo), "files": files}


def dump_push_result(output_dir: str | Path, result: dict) -> None:
    """Record what was published next to the run's other outputs."""
    (Path(output_dir) / "push_result.json").write_text(json.dumps(result, indent=2))
