"""Hub publishing: `--push_dry_run DIR` writes exactly what `--push_to_hub` would upload, never touching the network;
the real push goes through huggingface_hub's HfApi with that same folder; the token is never written anywhere."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from tests.support.launched_run import ARG_TOKEN, ENV_TOKEN
from training.outputs import hub
from training.outputs.hub import HubPushError, PushRequest, RunInfo

EXPECTED_FILES = {
    "README.md", "adapter_config.json", "adapter_model.safetensors", "chat_template.jinja", "metrics.jsonl",
    "recipe.yaml", "reward_curve.png", "run_summary.json", "tokenizer.json", "tokenizer_config.json",
    "merged/config.json", "merged/generation_config.json", "merged/model.safetensors",
}  # fmt: skip


@pytest.fixture
def dry_run(launched_cpu_run):
    """The shared launcher run: --push_to_hub with a token on the command line and in HF_TOKEN, and a dry run."""
    return launched_cpu_run


def listing(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}


def test_dry_run_writes_the_upload(dry_run):
    push, out = dry_run["push"], dry_run["out"]
    assert listing(push) == EXPECTED_FILES
    assert (push / "adapter_model.safetensors").read_bytes() == (out / "adapter_model.safetensors").read_bytes()
    result = json.loads((out / "push_result.json").read_text())
    assert result["dry_run"] is True and set(result["files"]) == EXPECTED_FILES
    summary = json.loads((out / "run_summary.json").read_text())
    assert summary["hub_push"] == {"repo_id": "me/tiny-grpo", "dry_run_dir": str(push)}


def test_model_card_reports_base_model_flags_final_metrics_and_reward_curve(dry_run):
    card = (dry_run["push"] / "README.md").read_text()
    last = [json.loads(line) for line in (dry_run["out"] / "metrics.jsonl").read_text().splitlines()]
    last = [row for row in last if "loss" in row][-1]
    assert card.startswith("---\n") and "library_name: peft" in card
    assert "# me/tiny-grpo" in card
    assert "- `model_name_or_path`: `tiny-qwen3`" in card
    for flag, value in {"FORCE_RATE": "0.0", "STRICT_TRAJ_KEYS": "1", "PPO_RECORD_AT_SAMPLE": "1"}.items():
        assert f"| `{flag}` | `{value}` |" in card
    assert "## Final metrics (step 2)" in card
    assert f"| `reward` | {last['reward']:.4g} |" in card
    assert f"| `grad_norm` | {last['grad_norm']:.4g} |" in card
    assert "![reward curve](reward_curve.png)" in card and "| 2 | " in card
    assert "`recipes/tiny_cpu.yaml`:" in card and "model_name_or_path: tiny-qwen3" in card


def test_token_is_never_written_or_logged(dry_run):
    """Every file the run wrote (checkpoints and pickled training args included), the upload, and the logs
    (the launcher's and the trainer's)."""
    files = [p for p in dry_run["root"].rglob("*") if p.is_file()]
    assert any(p.name == "training_args.bin" for p in files)  # the pickle that would carry a token
    for path in files:
        content = path.read_bytes()
        for token in (ARG_TOKEN, ENV_TOKEN):
            assert token.encode() not in content, f"{path} contains the token"
    assert ARG_TOKEN not in dry_run["log"] and ENV_TOKEN not in dry_run["log"]
    assert "--hub_token <redacted>" in (dry_run["push"] / "README.md").read_text()


def test_merged_weights_equal_base_plus_adapter(dry_run, tiny_model_dir):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    push = dry_run["push"]
    merged = AutoModelForCausalLM.from_pretrained(push / "merged", dtype=torch.float32)
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    with_adapter = PeftModel.from_pretrained(base, str(push))
    ids = torch.tensor([[1, 5, 9, 42, 7, 3]])
    with torch.no_grad():
        got, want = merged(ids).logits, with_adapter(ids).logits
        plain = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)(ids).logits
    assert torch.allclose(got, want, atol=1e-5)
    assert not torch.allclose(got, plain, atol=1e-5)  # the adapter trained: merging changed something


def run_info(out: Path) -> RunInfo:
    summary = json.loads((out / "run_summary.json").read_text())
    return RunInfo("tiny-qwen3", summary["resolved_model_path"], "recipes/tiny_cpu.yaml", ["--hub_token", "x"],
                   summary["strict_flags"], summary)  # fmt: skip


class NoNetwork:
    def __init__(self, *args, **kwargs):
        raise AssertionError("the dry run constructed HfApi")


def test_dry_run_never_builds_a_hub_client(dry_run, tmp_path, monkeypatch):
    monkeypatch.setattr(hub, "HfApi", NoNetwork)
    request = PushRequest(repo_id="me/x", dry_run_dir=str(tmp_path / "again"), merged=False, private=None)
    result = hub.publish(request, run_info(dry_run["out"]), dry_run["out"])
    assert result["dry_run"] and "merged/model.safetensors" not in result["files"]
    assert listing(tmp_path / "again") == EXPECTED_FILES - {f for f in EXPECTED_FILES if f.startswith("merged/")}


def test_real_push_uploads_the_staged_folder_through_hfapi(dry_run, monkeypatch):
    calls = []

    class FakeHfApi:
        def __init__(self, token=None):
            calls.append(("init", token))

        def create_repo(self, repo_id, private=None, exist_ok=False, repo_type=None):
            calls.append(("create_repo", repo_id, private, exist_ok, repo_type))
            return f"https://huggingface.co/{repo_id}"

        def upload_folder(self, repo_id, folder_path, repo_type=None, commit_message=None):
            calls.append(("upload_folder", repo_id, repo_type, listing(Path(folder_path))))
            return SimpleNamespace(commit_url=f"https://huggingface.co/{repo_id}/commit/1")

    monkeypatch.setattr(hub, "HfApi", FakeHfApi)
    request = PushRequest(repo_id="me/tiny-grpo", dry_run_dir=None, merged=True, private=True, token=ARG_TOKEN)
    result = hub.publish(request, run_info(dry_run["out"]), dry_run["out"], "float32")
    assert calls == [
        ("init", ARG_TOKEN),
        ("create_repo", "me/tiny-grpo", True, True, "model"),
        ("upload_folder", "me/tiny-grpo", "model", EXPECTED_FILES),
    ]
    assert result == {
        "dry_run": False,
        "repo_url": "https://huggingface.co/me/tiny-grpo",
        "files": sorted(EXPECTED_FILES),
    }


def test_take_push_request_strips_push_and_token_from_trainer_args(tmp_path):
    from training.run_setup.config import StrictGRPOConfig

    args = StrictGRPOConfig(output_dir=str(tmp_path), use_cpu=True, push_to_hub=True, hub_model_id="me/x",
                            hub_token=ARG_TOKEN, report_to="none")  # fmt: skip
    request = hub.take_push_request(args)
    assert request.repo_id == "me/x" and request.token == ARG_TOKEN and not request.dry_run
    assert args.push_to_hub is False and args.hub_token is None  # Trainer will neither push nor pickle the token
    assert ARG_TOKEN not in repr(request)

    with pytest.raises(HubPushError, match="--push_to_hub needs --hub_model_id"):
        hub.take_push_request(StrictGRPOConfig(output_dir=str(tmp_path), use_cpu=True, push_to_hub=True))
    with pytest.raises(HubPushError, match="push_merged_weights=True needs"):
        hub.take_push_request(StrictGRPOConfig(output_dir=str(tmp_path), use_cpu=True, push_merged_weights=True))
    assert hub.take_push_request(StrictGRPOConfig(output_dir=str(tmp_path), use_cpu=True)) is None
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "README.md").write_text("an earlier upload")
    with pytest.raises(HubPushError, match="is not empty"):  # refused before training, not after
        taken = str(tmp_path / "taken")
        hub.take_push_request(StrictGRPOConfig(output_dir=str(tmp_path), use_cpu=True, push_dry_run=taken))


def test_staged_file_with_the_token_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text(f"token={ENV_TOKEN}")
    with pytest.raises(HubPushError, match="notes.txt contains the Hub token"):
        hub.check_no_secret(tmp_path, [ENV_TOKEN])


def test_token_options_and_recipe_keys_are_redacted(tmp_path):
    argv = ["--hub_token", ARG_TOKEN, "--other_token=abc", "--max_steps", "3"]
    assert hub.redact_argv(argv) == ["--hub_token", "<redacted>", "--other_token=<redacted>", "--max_steps", "3"]
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"max_steps: 3\nhub_token: {ARG_TOKEN}\n")
    assert hub.redacted_recipe(str(recipe)) == "max_steps: 3\nhub_token: <redacted>\n"


def test_push_without_repo_is_refused_before_training(tmp_path, monkeypatch, capsys):
    from training import train

    out = tmp_path / "out"
    argv = ["train", "--config", "recipes/tiny_cpu.yaml", "--output_dir", str(out), "--push_to_hub"]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as exit_info:
        train.cli()
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "error: --push_to_hub needs --hub_model_id (the repository to upload to, e.g. me/qwen3-grpo)"
    )
    assert not out.exists()  # nothing trained, nothing written


def test_upload_names_no_path_of_the_training_machine(dry_run):
    """Home, output, push, cache and working directories appear in no staged file (any file type); the base model
    is named as the locally built tiny Qwen3."""
    from training.run_setup.models import cache_root

    out, push = dry_run["out"].resolve(), dry_run["push"].resolve()
    local = {str(Path.home()), str(out), str(push), str(cache_root().resolve()), str(Path.cwd()), str(out.parent)}
    for path in (p for p in push.rglob("*") if p.is_file()):
        content = path.read_bytes()
        for text in local:
            assert text.encode() not in content, f"{path.relative_to(push)} holds {text}"
    assert json.loads((push / "adapter_config.json").read_text())["base_model_name_or_path"] == "tiny-qwen3"
    assert "a locally built tiny Qwen3" in (push / "README.md").read_text()
    summary = json.loads((push / "run_summary.json").read_text())
    assert summary["training_args"]["output_dir"] == "<output_dir>"


def test_token_without_a_push_is_never_written(tmp_path):
    """`--hub_token` with no push flag: no file under output_dir (checkpoints and training_args.bin included)."""
    from training.train import main

    out = tmp_path / "run"
    main(["--config", "recipes/tiny_cpu.yaml", "--output_dir", str(out), "--hub_token", ARG_TOKEN,
          "--warm_start_steps", "0", "--heldout_file", "", "--per_device_train_batch_size", "4",
          "--num_generations", "4", "--max_completion_length", "4", "--max_steps", "1", "--save_steps", "1",
          "--strict_health", "false", "--disable_tqdm", "true"])  # fmt: skip
    files = [p for p in out.rglob("*") if p.is_file()]
    assert {"training_args.bin", "optimizer.pt", "run_summary.json"} <= {p.name for p in files}
    for path in files:
        assert ARG_TOKEN.encode() not in path.read_bytes(), f"{path} contains the token"


def test_output_dir_card_names_the_base_model_without_paths(dry_run):
    """TRL's card in output_dir said "fine-tuned version of [None]" and PEFT's named the cache directory."""
    from training.run_setup.models import cache_root

    card = (dry_run["out"] / "README.md").read_text()
    assert "[None]" not in card and str(cache_root().resolve()) not in card
    assert "`model_name_or_path`: `tiny-qwen3`: a locally built tiny Qwen3" in card
