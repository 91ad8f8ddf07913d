"""Held-out reward: completions of held-out prompts, scored by the run's reward functions, one record per episode.

Sampled (the policy's expected reward, what GRPO optimises: `num_samples` completions per prompt at the training
temperature, top-p, top-k, min-p and repetition penalty, each from its own episode seed so that evaluations of two
models are paired) or greedy. An episode whose reward a function cannot give (None, NaN) is kept as unscorable: counted,
and left out of the mean (training/evaluation/episodes.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from training.evaluation.episode_settings import EpisodeSettings
from training.evaluation.episode_streams import seeded_sampling_kwargs
from training.evaluation.episodes import Episode, summarize, weighted_episode
from training.evaluation.pairing_seeds import episode_seed, stream_seed
from training.evaluation.progress import episode_bar


@contextmanager
def seeded_rng(seed: int, device: torch.device) -> Iterator[None]:
    """Seed the generators `generate` samples from (the CPU's, and `device`'s on CUDA) and restore them on exit, so
    held-out samples are paired across evaluations and training's own random stream is left as it was."""
    devices = []
    if device.type == "cuda":
        devices = [device.index if device.index is not None else torch.cuda.current_device()]
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield


def reward_name(func) -> str:
    return getattr(func, "__name__", type(func).__name__)


@torch.no_grad()
def heldout_episodes(
    model,
    tokenizer,
    rows: list[dict],
    reward_funcs: list,
    settings: EpisodeSettings,
    reward_weights: list[float] | None = None,
    batch_size: int = 64,
    progress: str | None = None,
) -> list[Episode]:
    """One `Episode` per (row, sample): one completion of up to `settings.max_completion_length` tokens each, greedy
    (`settings.sampling` None) or sampled (as the trainer samples: `episode_settings.sampling_of`),
    `settings.episodes_per_row` per row, episode (r, s) sampled from `episode_seed(settings.seed, r, s)`. Score = sum_i
    w_i r_i over the reward functions. The model is left in the mode it was in, and the global RNG state is left
    untouched. `progress` labels the bar of episodes done (training/evaluation/progress.py)."""
    sampling, seed, template_kwargs = settings.sampling, settings.seed, settings.template_kwargs
    weights = reward_weights or [1.0] * len(reward_funcs)
    names = [reward_name(f) for f in reward_funcs]
    by_name = dict(zip(names, weights, strict=True))
    repeats = settings.episodes_per_row
    ids = [(r, s) for r in range(len(rows)) for s in range(repeats)]
    was_training, padding_side = model.training, tokenizer.padding_side
    model.eval()
    tokenizer.padding_side = "left"
    episodes: list[Episode] = []
    bar = episode_bar(len(ids), progress)
    with seeded_rng(seed, model.device):  # judges or reward functions that draw random numbers stay reproducible
        try:
            for start in range(0, len(ids), batch_size):
                chunk = ids[start : start + batch_size]
                chunk_rows = [rows[r] for r, _ in chunk]
                seeds = [episode_seed(seed, r, s) for r, s in chunk] if sampling is not None else [None] * len(chunk)
                texts = [
                    tokenizer.apply_chat_template(
                        row["prompt"], add_generation_prompt=True, tokenize=False, **template_kwargs
                    )
                    for row in chunk_rows
                ]
                enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
                generate_kwargs = (
                    {"do_sample": False}
                    if sampling is None
                    else seeded_sampling_kwargs(sampling, [stream_seed(s, 0) for s in seeds])
                )
                out = model.generate(**enc, max_new_tokens=settings.max_completion_length, **generate_kwargs)
                decoded = tokenizer.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
                completions = [[{"role": "assistant", "content": text}] for text in decoded]
                columns = {k: [row[k] for row in chunk_rows] for k in chunk_rows[0] if k != "prompt"}
                prompts = [row["prompt"] for row in chunk_rows]
                values = {
                    name: _per_episode(name, func(prompts=prompts, completions=completions, **columns), len(chunk))
                    for name, func in zip(names, reward_funcs, strict=True)
                }
                for k, ((r, s), episode_seed_k) in enumerate(zip(chunk, seeds, strict=True)):
                    episode = weighted_episode(r, s, episode_seed_k, {n: values[n][k] for n in names}, by_name)
                    episode.extra["completion"] = decoded[k]
                    episodes.append(episode)
                bar.update(len(chunk))
        finally:
            bar.close()
            tokenizer.padding_side = padding_side
            model.train(was_training)
    return episodes


def _per_episode(name: str, values, n: int) -> list:
    """A reward function's output for n completions: None (it scores none of them) becomes n Nones; a list of
    another length is a bug in the function and raises, naming it."""
    if values is None:
        return [None] * n
    values = list(values)
    if len(values) != n:
        raise ValueError(f"reward function {name!r} returned {len(values)} rewards for {n} completions")
    return values


def heldout_reward(model, tokenizer, rows: list[dict], reward_funcs: list, settings: EpisodeSettings,
                   **kwargs) -> float:
    """Mean weighted reward of `heldout_episodes(...)` over its scorable episodes (NaN when none is scorable)."""
    mean = summarize(heldout_episodes(model, tokenizer, rows, reward_funcs, settings, **kwargs)).mean
    return float("nan") if mean is None else mean
