"""Publishing a finished run to the Hugging Face Hub: the LoRA adapter (optionally merged weights), the tokenizer and
a generated model card (base model, recipe, strict flags, final metrics, reward curve).

Transformers' Trainer pushes by itself when `push_to_hub` is set (it creates the repo at start-up and uploads at
every save), and it pickles its arguments, token included, into `training_args.bin`. So `take_push_request` takes
the push settings and the token out of the training arguments before the trainer exists; after training,
`publish` stages exactly the files to upload into one folder (`--push_dry_run DIR` stops there, without touching the
network) and uploads that folder through `huggingface_hub.HfApi`. Before anything leaves, every staged file is
checked for the token.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from huggingface_hub import HfApi, ModelCard, ModelCardData, get_token

from training.errors import BadInputError
from training.report import read_metrics

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
    "reward_curve.png",
    "run_summary.json",
    "metrics.jsonl",
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


def take_push_request(args) -> PushRequest | None:
    """Move the push settings out of `args` (a StrictGRPOConfig) so the Trainer neither pushes nor stores the token.

    Returns None when neither `push_to_hub` nor `push_dry_run` is set.
    """
    if not args.push_to_hub and not args.push_dry_run:
        if args.push_merged_weights:
            raise HubPushError("push_merged_weights=True needs --push_to_hub or --push_dry_run DIR")
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


def render_model_card(run: RunInfo, request: PushRequest, output_dir: str | Path, merged: bool) -> ModelCard:
    """The README.md of the uploaded repository."""
    summary = run.summary
    metrics = final_metrics(output_dir)
    data = ModelCardData(
        base_model=run.base_model if _is_hub_id(run.base_model) else None,
        library_name="peft",
        pipeline_tag="text-generation",
        tags=["strict-grpo", "grpo", "trl", "lora", *(["merged"] if merged else [])],
    )
    lines = [
        f"# {request.repo_id or Path(str(output_dir)).name}",
        "",
        "A LoRA adapter trained with GRPO by the strict GRPO stack (TRL "
        f"{summary.get('library_versions', {}).get('trl', '?')}, PEFT "
        f"{summary.get('library_versions', {}).get('peft', '?')}).",
        "",
        "## Base model",
        "",
        f"- `model_name_or_path`: `{run.base_model}`",
    ]
    if run.resolved_model_path != run.base_model:
        lines.append(f"- the adapter was trained on top of: `{run.resolved_model_path}`")
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
    if (Path(output_dir) / "reward_curve.png").exists():
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


def stage_upload(request: PushRequest, run: RunInfo, output_dir: str | Path, stage: Path, dtype: str | None) -> Path:
    """Write into `stage` exactly the files to upload; refuse if any of them contains the token."""
    output_dir = Path(output_dir)
    missing = [name for name in ADAPTER_FILES if not (output_dir / name).exists()]
    if missing:
        raise HubPushError(f"{output_dir} has no {', '.join(missing)}: the adapter was not saved, nothing to publish")
    if stage.exists() and any(stage.iterdir()):
        raise HubPushError(f"push staging directory {str(stage)!r} is not empty; choose an empty or new directory")
    stage.mkdir(parents=True, exist_ok=True)
    for name in ADAPTER_FILES + OPTIONAL_FILES:
        if (output_dir / name).exists():
            shutil.copy2(output_dir / name, stage / name)
    recipe = redacted_recipe(run.recipe_path)
    if recipe is not None:
        (stage / "recipe.yaml").write_text(recipe)
    if request.merged:
        write_merged_weights(output_dir, run.resolved_model_path, stage / "merged", dtype)
    render_model_card(run, request, output_dir, merged=request.merged).save(stage / "README.md")
    check_no_secret(stage, request.secrets())
    return stage


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
