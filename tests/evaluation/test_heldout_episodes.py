"""Held-out evaluation one episode at a time: paired per-episode seeds, exact sampling, unscorable episodes counted
(never zeros), tools that raise answered with the error, strict JSON files."""

import json
import math
from collections import Counter

import numpy as np
import pytest
import torch
from scipy import stats
from transformers import AutoModelForCausalLM, AutoTokenizer

import training.evaluation.tool_episodes as env_eval
import training.evaluation.tool_loop as tool_loop
from training.evaluation.episode_settings import SAMPLING_DEFAULTS, EpisodeSettings, sampling_of
from training.evaluation.episode_streams import GumbelNoise, seeded_sampling_kwargs
from training.evaluation.episodes import read_episodes, summarize
from training.evaluation.heldout_reward import heldout_episodes, heldout_reward
from training.evaluation.pairing_seeds import episode_seed
from training.outputs.jsonsafe import nonfinite_to_null
from training.outputs.run_summary import write_run_summary
from training.run_setup.prompt_datasets import load_rows
from training.tasks.larger_number.rewards import (
    answer_format_reward,
    exact_answer_reward,
)
from training.tasks.workspace.env import WorkspaceEnv

SAMPLING = {"temperature": 1.0, "top_p": 1.0, "top_k": 0}
NO_THINKING = {"enable_thinking": False}


def strict_load(text: str):
    def refuse(token):
        raise ValueError(f"not JSON: {token}")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def model_and_tokenizer(tiny_model_dir):
    return AutoModelForCausalLM.from_pretrained(tiny_model_dir), AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="module")
def rows():
    return load_rows("data/larger_number/heldout.jsonl")[:6]


def _episodes(model_and_tokenizer, rows, funcs, sampling=None, num_samples=1, seed=0, **kwargs):
    model, tokenizer = model_and_tokenizer
    settings = EpisodeSettings(sampling=sampling, episodes_per_row=num_samples, seed=seed, template_kwargs=NO_THINKING,
                               max_completion_length=8)
    return heldout_episodes(model, tokenizer, rows, funcs, settings, **kwargs)


def test_gumbel_max_samples_the_softmax_of_the_processed_logits():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0, -30.0]])
    n = 4000
    picks = Counter()
    for seed in range(n):
        kwargs = seeded_sampling_kwargs({"temperature": 0.7, "top_k": 4}, [seed])
        scores = logits.clone()
        for processor in kwargs["logits_processor"]:
            scores = processor(None, scores)
        picks[int(scores.argmax())] += 1
    assert picks[4] == 0  # top-k filtered: never drawn
    expected = torch.softmax(logits[0, :4].double() / 0.7, dim=0).numpy()
    expected = expected / expected.sum() * n
    observed = [picks[i] for i in range(4)]
    assert stats.chisquare(observed, expected).pvalue > 1e-3, (observed, expected)


def test_min_p_cuts_the_tail_and_samples_the_rest_in_proportion():
    logits = torch.tensor([[2.0, 1.5, 0.0, -1.0]])  # probabilities 0.53, 0.32, 0.07, 0.03: min_p 0.2 keeps two
    n = 4000
    picks = Counter()
    for seed in range(n):
        scores = logits.clone()
        for processor in seeded_sampling_kwargs({"min_p": 0.2}, [seed])["logits_processor"]:
            scores = processor(None, scores)
        picks[int(scores.argmax())] += 1
    assert picks[2] == picks[3] == 0
    expected = torch.softmax(logits[0, :2].double(), dim=0).numpy() * n
    assert stats.chisquare([picks[0], picks[1]], expected).pvalue > 1e-3, (picks, expected)


def test_heldout_samples_as_the_trainer_samples(make_trainer, model_and_tokenizer, rows):
    """min_p and the repetition penalty reach the held-out sampler, from the trainer and from a recorded recipe; a
    setting it cannot mirror is refused, not ignored."""
    trainer = make_trainer(temperature=0.9, top_p=0.95, min_p=0.05, repetition_penalty=1.1, max_steps=1)
    wanted = {"temperature": 0.9, "top_p": 0.95, "top_k": 0, "min_p": 0.05, "repetition_penalty": 1.1}
    assert EpisodeSettings.from_trainer(trainer, seed=0).sampling == wanted
    assert sampling_of({"temperature": 0.9, "top_p": 0.95, "min_p": 0.05, "repetition_penalty": 1.1}) == wanted
    assert sampling_of({}) == SAMPLING_DEFAULTS
    plain = _episodes(model_and_tokenizer, rows, [answer_format_reward], sampling=SAMPLING, seed=3)
    cut = _episodes(model_and_tokenizer, rows, [answer_format_reward], sampling={**SAMPLING, "min_p": 0.3,
                    "repetition_penalty": 1.3}, seed=3)
    assert [e.extra["completion"] for e in cut] != [e.extra["completion"] for e in plain]
    with pytest.raises(ValueError, match="typical_p"):
        seeded_sampling_kwargs({"typical_p": 0.9}, [0])


def test_each_row_draws_from_its_own_stream_whatever_shares_its_batch():
    scores = torch.zeros(3, 50)
    alone = GumbelNoise([11])(None, scores[:1].clone())
    batched = GumbelNoise([5, 11, 7])(None, scores.clone())
    # the same uniforms from the same stream; torch's log may take its scalar tail loop for a row alone and its vector
    # loop for the same row inside a batch, which can round a float64 element 1 ulp apart (below float32's resolution
    # at this size almost always); another stream differs by O(1)
    torch.testing.assert_close(alone[0], batched[1], rtol=0, atol=1e-6)
    assert (batched[0] - batched[1]).abs().max() > 0.1


def test_sampled_episodes_are_paired_by_id_and_seed_not_by_batch(model_and_tokenizer, rows):
    funcs = [exact_answer_reward, answer_format_reward]
    rng = torch.get_rng_state()
    big = _episodes(model_and_tokenizer, rows, funcs, sampling=SAMPLING, num_samples=3, seed=7, batch_size=64)
    assert torch.equal(torch.get_rng_state(), rng)
    small = _episodes(model_and_tokenizer, rows, funcs, sampling=SAMPLING, num_samples=3, seed=7, batch_size=4)
    other = _episodes(model_and_tokenizer, rows, funcs, sampling=SAMPLING, num_samples=3, seed=8)
    assert [e.id for e in big] == [f"{r}:{s}" for r in range(6) for s in range(3)]
    assert [e.seed for e in big] == [episode_seed(7, r, s) for r in range(6) for s in range(3)]
    assert [e.extra["completion"] for e in big] == [e.extra["completion"] for e in small]
    assert [e.extra["completion"] for e in big] != [e.extra["completion"] for e in other]
    # A shorter held-out split keeps the episodes it shares with the longer one.
    head = _episodes(model_and_tokenizer, rows[:2], funcs, sampling=SAMPLING, num_samples=3, seed=7)
    assert [e.extra["completion"] for e in head] == [e.extra["completion"] for e in big[:6]]
    greedy = _episodes(model_and_tokenizer, rows, funcs)
    assert [e.id for e in greedy] == [f"{r}:0" for r in range(6)] and all(e.seed is None for e in greedy)


def _none_for_odd_rows(completions, row_id, **kwargs):
    return [None if i % 2 else 1.0 for i in row_id]


def _nan_for_row_zero(completions, row_id, **kwargs):
    return [float("nan") if i == 0 else 0.5 for i in row_id]


def test_none_and_nan_rewards_are_counted_and_left_out_of_the_mean(model_and_tokenizer, rows):
    rows = [{**r, "row_id": i} for i, r in enumerate(rows)]
    episodes = _episodes(model_and_tokenizer, rows, [_none_for_odd_rows, _nan_for_row_zero], reward_weights=[1.0, 2.0],
                         sampling=SAMPLING, num_samples=2, seed=0)
    unscorable = [e for e in episodes if e.score is None]
    assert sorted({e.row for e in unscorable}) == [0, 1, 3, 5]
    assert "_none_for_odd_rows=None" in next(e for e in unscorable if e.row == 1).unscorable_reason
    summary = summarize(episodes)
    assert (summary.n, summary.nan_count) == (4, 8)
    assert summary.mean == pytest.approx(1.0 + 2 * 0.5)  # rows 2 and 4 only: never averaged with zeros
    model, tokenizer = model_and_tokenizer
    settings = EpisodeSettings(template_kwargs=NO_THINKING, max_completion_length=4)
    assert heldout_reward(model, tokenizer, rows, [_none_for_odd_rows], settings) == 1.0
    assert math.isnan(heldout_reward(model, tokenizer, rows, [lambda completions, **k: None],
                                     EpisodeSettings(max_completion_length=4)))


def test_trainer_heldout_logs_nan_count_and_writes_strict_episode_files(make_trainer, rows):
    trainer = make_trainer(reward_funcs=[_none_for_odd_rows], heldout_samples_per_prompt=2, heldout_seed=5)
    trainer.heldout_rows = [{**r, "row_id": i} for i, r in enumerate(rows[:4])]
    values = trainer.heldout.record()
    assert values["heldout/nan_count"] == 4.0 and values["heldout/reward"] == 1.0
    assert trainer._metrics["train"]["heldout/nan_count"] == [4.0]
    out = trainer.args.output_dir
    step_file = f"{out}/heldout/step-000000/eval.jsonl"
    episodes = read_episodes(step_file)
    assert len(episodes) == 8 and [e.seed for e in episodes[:2]] == [episode_seed(5, 0, 0), episode_seed(5, 0, 1)]
    summary = strict_load(open(f"{out}/heldout/step-000000/eval_summary.json").read())
    assert (summary["n"], summary["nan_count"], summary["mean"], summary["heldout_seed"]) == (4, 4, 1.0, 5)
    for line in open(step_file):
        strict_load(line)
    assert str(trainer.heldout.write_final()) == f"{out}/eval.jsonl"
    assert [e.as_json() for e in read_episodes(out)] == [e.as_json() for e in episodes]

    trainer.reward_funcs = [lambda completions, **k: [float("nan")] * len(completions)]
    trainer.reward_funcs[0].__name__ = "always_nan"
    values = trainer.heldout.evaluate()
    assert "heldout/reward" not in values and values["heldout/nan_count"] == 8.0


class _BrokenToolEnv(WorkspaceEnv):
    def list_channels(self):
        """List channels."""
        raise RuntimeError("channel service down")


class _NoneGoalEnv(WorkspaceEnv):
    def get_reward(self):
        return None if self.goal.get("channel") == "eng" else 1.0


def _always_calls_list_channels(tokenizer, ids, prefix=None, tools=None):
    return {"role": "assistant", "content": "",
            "tool_calls": [{"type": "function", "function": {"name": "list_channels", "arguments": {}}}]}


@pytest.fixture(scope="module")
def workspace_rows():
    from tests.support.tiny_trainer import workspace_post_rows

    return workspace_post_rows()[:3]


def test_a_tool_that_raises_answers_the_model_and_is_counted(monkeypatch, model_and_tokenizer, workspace_rows):
    model, tokenizer = model_and_tokenizer
    monkeypatch.setattr(tool_loop, "parse_response", _always_calls_list_channels)
    seen = []
    original = tool_loop._run_calls
    monkeypatch.setattr(tool_loop, "_run_calls", lambda m, ep: seen.append(original(m, ep)) or seen[-1])
    settings = EpisodeSettings(sampling=SAMPLING, episodes_per_row=2, seed=1, template_kwargs=NO_THINKING,
                               max_completion_length=64, max_iterations=1, max_tool_calls=4)
    episodes, counts = env_eval.environment_episodes(model, tokenizer, workspace_rows, _BrokenToolEnv, settings)
    assert counts[env_eval.TOOL_ERROR] == 3 * 2  # the call of the one round of every episode
    assert seen[0][0]["content"] == str({"error": "channel service down"})  # what TRL's loop answers
    assert len(episodes) == 6 and all(e.score == 0.0 and e.success is False for e in episodes)


def test_a_goal_checker_without_a_reward_leaves_its_episode_unscorable(model_and_tokenizer, workspace_rows):
    model, tokenizer = model_and_tokenizer
    rows = [dict(workspace_rows[0], goal_json=json.dumps({"channel": "eng", "text": "x"})), *workspace_rows[1:]]
    goals = [json.loads(r["goal_json"]).get("channel") for r in rows]
    sink = []
    settings = EpisodeSettings(template_kwargs=NO_THINKING, max_completion_length=2, max_iterations=0)
    mean, _ = env_eval.environment_success(model, tokenizer, rows, _NoneGoalEnv, settings, episodes=sink)
    expected_none = [g == "eng" for g in goals]
    assert [e.score is None for e in sink] == expected_none and any(expected_none) and not all(expected_none)
    assert mean == 1.0 and summarize(sink).nan_count == sum(expected_none)


def test_run_summary_is_strict_json_with_nan_as_null_and_counted(tmp_path):
    path = write_run_summary(tmp_path, {"heldout_reward_after": float("nan"), "history": [{"r": float("inf")}, 1.0]})
    data = strict_load(path.read_text())
    assert data["heldout_reward_after"] is None and data["history"][0]["r"] is None
    assert data["nonfinite_values"] == ["$.heldout_reward_after", "$.history[0].r"]
    assert nonfinite_to_null({"a": [1.0, 2]}) == ({"a": [1.0, 2]}, [])


def test_a_finished_run_leaves_its_final_episodes_beside_the_summary(launched_cpu_run):
    out = launched_cpu_run["out"]
    summary = strict_load((out / "run_summary.json").read_text())
    episodes = read_episodes(out / "eval.jsonl")
    assert len(episodes) == 4 * summary["training_args"]["heldout_samples_per_prompt"]  # --heldout_max_samples 4
    assert summarize(episodes).mean == pytest.approx(summary["heldout_reward_after"])
    final = strict_load((out / "eval_summary.json").read_text())
    assert final["step"] == summary["global_step"] and final["heldout_seed"] == summary["training_args"]["heldout_seed"]
    assert (out / "heldout" / "step-000000" / "eval.jsonl").exists()  # the evaluation before training
    # the end-of-run change: per held-out row, the final minus the step-0 mean reward, over the rows
    change = {c["metric"]: c for c in summary["heldout_change"]}
    assert list(change) == ["reward", "greedy_reward"]  # the sampled reward GRPO optimises, then greedy decoding's
    for metric, file in (("reward", "eval.jsonl"), ("greedy_reward", "eval_greedy.jsonl")):
        start = read_episodes(out / "heldout" / "step-000000" / file)
        final = read_episodes(out / "heldout" / f"step-{summary['global_step']:06d}" / file)
        per_row = [np.mean([e.score for e in final if e.row == r]) - np.mean([e.score for e in start if e.row == r])
                   for r in {e.row for e in final}]
        assert change[metric]["rows"] == 4 and change[metric]["diff"] == pytest.approx(np.mean(per_row))
        lo, hi = change[metric]["ci95"]
        assert lo <= change[metric]["diff"] <= hi and change[metric]["verdict"]


def test_runs_trained_with_different_seeds_are_paired_by_default(make_trainer, rows):
    """The evaluation's seed belongs to the evaluation: two runs trained with seeds 0 and 1 and no heldout_seed
    play the same episode seeds, so `training.compare` pairs them."""
    seeds = []
    for seed in (0, 1):
        trainer = make_trainer(reward_funcs=[_none_for_odd_rows], heldout_samples_per_prompt=2, seed=seed)
        trainer.heldout_rows = [{**r, "row_id": i} for i, r in enumerate(rows[:2])]
        trainer.heldout.record()
        seeds.append([e.seed for e in read_episodes(f"{trainer.args.output_dir}/heldout/step-000000/eval.jsonl")])
    assert seeds[0] == seeds[1] == [episode_seed(0, r, s) for r in range(2) for s in range(2)]
