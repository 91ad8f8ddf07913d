"""The tool agent's starting point: task words the tiny tokenizer copies as whole tokens, the weaker teacher's lazy
traces, and held-out success over sampled episodes."""

import json
from dataclasses import replace

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

import training.run_setup.warm_start_tools as warm_start_tools
from training.evaluation.episode_settings import EpisodeSettings
from training.evaluation.tool_episodes import environment_success
from training.evaluation.tool_loop import sampling_chat_template
from training.run_setup.prompt_datasets import load_rows
from training.run_setup.warm_start_tools import encode_trace, trace_warm_start
from training.tasks.workspace.env import WorkspaceEnv
from training.tasks.workspace.splits import CHANNELS, TEXTS, TITLES
from training.tool_use.system_prompt import render_system_prompt, with_system_prompt

NO_THINKING = {"enable_thinking": False}


@pytest.fixture(scope="module")
def workspace_rows() -> list[dict]:
    prompt = render_system_prompt("prompts/workspace_agent.jinja", WorkspaceEnv)
    return with_system_prompt(load_rows("data/workspace/train.jsonl")[:4], prompt)


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    return AutoTokenizer.from_pretrained(tiny_model_dir)


def test_task_words_are_single_tokens_with_the_same_ids_in_request_and_tool_call(tokenizer):
    for phrase in (*CHANNELS, *TEXTS, *TITLES):
        assert len(tokenizer(phrase)["input_ids"]) == len(phrase.split()), phrase
    text = TEXTS[0]
    request = tokenizer(f"Post '{text}' to #{CHANNELS[1]}.")["input_ids"]
    call = tokenizer(json.dumps({"channel": CHANNELS[1], "text": text}))["input_ids"]
    copied = tokenizer(text)["input_ids"]
    assert len(copied) == len(text.split())
    for ids in (request, call):
        assert any(ids[i : i + len(copied)] == copied for i in range(len(ids))), (text, ids)


def _trained_text(tokenizer, labels) -> str:
    return tokenizer.decode([t for t in labels if t != -100])


def test_lazy_trace_trains_only_a_final_answer_without_tool_call(tokenizer, workspace_rows):
    template = sampling_chat_template(tokenizer)
    row = workspace_rows[0]
    _, acting = encode_trace(tokenizer, row, WorkspaceEnv, template, NO_THINKING)
    _, lazy = encode_trace(tokenizer, row, WorkspaceEnv, template, NO_THINKING, lazy=True)
    reference = json.loads(row["reference_calls_json"])[0]
    assert "<tool_call>" in _trained_text(tokenizer, acting) and reference["name"] in _trained_text(tokenizer, acting)
    trained = _trained_text(tokenizer, lazy)
    assert "<tool_call>" not in trained and "Done." in trained
    assert sum(t != -100 for t in lazy) < sum(t != -100 for t in acting)


@pytest.mark.parametrize(("rate", "acting_share"), [(1.0, 1.0), (0.5, 0.5), (0.75, 0.75), (0.01, 0.125)])
def test_tool_call_rate_is_the_share_of_acting_traces_per_row(
    monkeypatch, tmp_path, tiny_model_dir, workspace_rows, rate, acting_share
):
    seen = {}

    def capture(model_path, kind, encode, *args, **kwargs):
        tokenizer = AutoTokenizer.from_pretrained(model_path)
        seen["labels"] = [labels for _, labels in encode(tokenizer)]
        seen["tokenizer"] = tokenizer
        return model_path

    monkeypatch.setattr(warm_start_tools, "fine_tune_cached", capture)
    monkeypatch.setenv("STRICT_GRPO_CACHE", str(tmp_path))
    trace_warm_start(tiny_model_dir, workspace_rows, WorkspaceEnv, steps=1, template_kwargs=NO_THINKING,
                     tool_call_rate=rate)
    acting = ["<tool_call>" in _trained_text(seen["tokenizer"], labels) for labels in seen["labels"]]
    assert sum(acting) / len(acting) == acting_share
    per_row = len(acting) // len(workspace_rows)
    for i in range(len(workspace_rows)):  # every row, not a subset of rows, has both kinds of trace
        assert sum(acting[i * per_row : (i + 1) * per_row]) / per_row == acting_share


@pytest.mark.parametrize("rate", [0.0, 1.5])
def test_tool_call_rate_outside_unit_interval_names_the_flag(tiny_model_dir, workspace_rows, rate):
    with pytest.raises(ValueError, match="warm_start_tool_call_rate"):
        trace_warm_start(tiny_model_dir, workspace_rows, WorkspaceEnv, steps=1, tool_call_rate=rate)


class _EveryOtherEpisodeSucceeds(WorkspaceEnv):
    created = 0

    def reset(self, **row):
        super().reset(**row)
        type(self).created += 1
        self.index = type(self).created

    def get_reward(self) -> float:
        return float(self.index % 2 == 0)


def test_sampled_heldout_success_averages_over_episodes_and_is_reproducible(tiny_model_dir, workspace_rows):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    greedy = EpisodeSettings(chat_template=sampling_chat_template(tokenizer), template_kwargs=NO_THINKING,
                             max_completion_length=8, max_iterations=0)
    sampling = {"temperature": 1.0, "top_p": 1.0, "top_k": 0}
    rows = workspace_rows[:3]

    _EveryOtherEpisodeSucceeds.created = 0
    rng = torch.get_rng_state()
    success, _ = environment_success(model, tokenizer, rows, _EveryOtherEpisodeSucceeds,
                                     replace(greedy, sampling=sampling, episodes_per_row=4, seed=7))
    assert torch.equal(torch.get_rng_state(), rng)
    assert _EveryOtherEpisodeSucceeds.created == 12 and success == 0.5

    _EveryOtherEpisodeSucceeds.created = 0
    environment_success(model, tokenizer, rows, _EveryOtherEpisodeSucceeds, greedy)
    assert _EveryOtherEpisodeSucceeds.created == 3  # greedy: one episode per row

    def replies(seed):
        envs = []

        def factory():
            envs.append(WorkspaceEnv())
            return envs[-1]

        episodes = []
        original = model.generate

        def recording_generate(**kwargs):
            out = original(**kwargs)  # the held-out loop's turn cache asks for the whole output
            episodes.append((out.sequences if hasattr(out, "sequences") else out).tolist())
            return out

        model.generate = recording_generate
        try:
            environment_success(model, tokenizer, rows, factory,
                                replace(greedy, sampling=sampling, episodes_per_row=2, seed=seed))
        finally:
            del model.generate
        return episodes

    assert replies(3) == replies(3)
    assert replies(3) != replies(4)


def test_tool_run_heldout_reports_sampled_greedy_and_malformed_calls(tmp_path, monkeypatch):
    from collections import Counter

    import training.evaluation.tool_episodes as tool_episodes
    from tests.support.tiny_trainer import build_tiny_env_trainer, workspace_post_rows
    from training.evaluation.episodes import Episode

    trainer = build_tiny_env_trainer(str(tmp_path / "out"), heldout_samples_per_prompt=3, temperature=0.9)
    trainer.heldout_rows = workspace_post_rows()[:2]
    calls = []

    def fake_episodes(model, tokenizer, rows, factory, settings, progress=None):
        calls.append({"rows": rows, "settings": settings})
        if settings.sampling is not None:
            return [Episode(0, 0, 1, 0.0), Episode(1, 0, 2, 0.5)], Counter(bad_json=2, tool_error=1, ended_at_limit=1)
        return [Episode(0, 0, None, 1.0), Episode(1, 0, None, 0.0)], Counter(unknown_tool=1, ended_at_limit=1)

    monkeypatch.setattr(tool_episodes, "environment_episodes", fake_episodes)
    result = trainer.evaluate_heldout()  # the generic environment task, as `python -m training.evaluate` plays it
    assert result == {"heldout/reward": 0.25, "heldout/greedy_reward": 0.5, "heldout/nan_count": 0.0,
                      "heldout/malformed_calls": 3.0, "heldout/tool_errors": 1.0, "heldout/ended_at_limit": 2.0}
    sampled = next(c for c in calls if c["settings"].sampling)
    assert sampled["settings"].sampling["temperature"] == 0.9 and sampled["settings"].episodes_per_row == 3
    assert sampled["rows"] == trainer.heldout_rows


def test_tool_run_heldout_generates_with_the_full_weights_gathered(tmp_path, monkeypatch):
    """Under ZeRO-3 a rank holds shards only: the environment episodes must be played inside
    `full_weights_for_generation`, as the reward-function and causal evaluations are."""
    from collections import Counter
    from contextlib import contextmanager

    import training.evaluation.tool_episodes as tool_episodes
    import training.evaluation.trainer_heldout as heldout
    from tests.support.tiny_trainer import build_tiny_env_trainer, workspace_post_rows

    trainer = build_tiny_env_trainer(str(tmp_path / "out"), heldout_samples_per_prompt=2)
    trainer.heldout_rows = workspace_post_rows()[:2]
    gathered, seen = [], []

    @contextmanager
    def recording_gather(model, accelerator):
        gathered.append(True)
        yield
        gathered.append(False)

    def fake_episodes(model, tokenizer, rows, factory, settings, progress=None):
        seen.append(gathered[-1] if gathered else False)
        return [], Counter()

    monkeypatch.setattr(heldout, "full_weights_for_generation", recording_gather)
    monkeypatch.setattr(tool_episodes, "environment_episodes", fake_episodes)
    trainer.evaluate_heldout()
    assert seen == [True, True]  # sampled and greedy, both inside the gather


@pytest.mark.gpu
def test_sampled_heldout_leaves_the_cuda_generator_as_it_was(tiny_model_dir, workspace_rows):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).to("cuda")
    cuda_rng, cpu_rng = torch.cuda.get_rng_state(), torch.get_rng_state()
    environment_success(model, tokenizer, workspace_rows[:2], WorkspaceEnv, EpisodeSettings(
        sampling={"temperature": 1.0}, episodes_per_row=2, seed=5, chat_template=sampling_chat_template(tokenizer),
        template_kwargs=NO_THINKING, max_completion_length=4, max_iterations=0))
    assert torch.equal(torch.cuda.get_rng_state(), cuda_rng) and torch.equal(torch.get_rng_state(), cpu_rng)


def test_decision_tokens_spell_each_calls_name_and_argument_values_and_nothing_else(tokenizer, workspace_rows):
    """The tokens a decision-weighted warm start weighs apart: decoded, the marked tokens of an acting trace are the
    reference calls' names and argument values, in order (a byte-level tokenizer spells them in several tokens)."""
    template = sampling_chat_template(tokenizer)
    row = workspace_rows[0]
    ids, labels, decisions = encode_trace(tokenizer, row, WorkspaceEnv, template, NO_THINKING, decisions=True)
    assert len(decisions) == len(ids) and all(label != -100 for label, d in zip(labels, decisions) if d)
    marked = tokenizer.decode([t for t, d in zip(ids, decisions) if d])
    expected = "".join(call["name"] + "".join(str(v) for v in call["arguments"].values())
                       for call in json.loads(row["reference_calls_json"]))
    assert marked.replace(" ", "") == expected.replace(" ", "")
    assert encode_trace(tokenizer, row, WorkspaceEnv, template, NO_THINKING)[:2] == (ids, labels)
