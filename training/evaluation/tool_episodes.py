"""Held-out task success: multi-turn episodes in the environment, scored by its goal checker, one record each.

Greedy, or sampled as in training (`num_samples` episodes per row at the training temperature, top-p and top-k,
each from its own episode seed, so that evaluations of two models are paired): the policy's expected success, what
GRPO optimises. A tool that raises answers the model with the error, as in training, and is counted
(`tool_error`); a goal checker that returns None or NaN leaves its episode unscorable: counted and out of the mean,
never scored 0.
"""

from __future__ import annotations

import inspect
import logging
from collections import Counter

import torch
from trl.chat_template_utils import add_response_schema, parse_response

from training.evaluation.episode_streams import seeded_sampling_kwargs, stream_seed
from training.evaluation.episodes import Episode, episode_seed, finite_or_none, summarize
from training.evaluation.heldout_reward import seeded_rng
from training.tool_use.tool_calls import EpisodeTools, ToolCallError, install_strict_parsing

logger = logging.getLogger(__name__)

# A tool that raised something other than a schema refusal (`ToolCallError`) is counted under this kind.
TOOL_ERROR = "tool_error"


def environment_tools(env) -> dict:
    """`{name: bound method}` of an environment instance, the tools TRL would expose for it."""
    return {
        name: getattr(env, name)
        for name, _ in inspect.getmembers(type(env), predicate=inspect.isfunction)
        if not name.startswith("_") and name not in ("reset", "get_reward")
    }


def _run_calls(message: dict, tools: EpisodeTools) -> list[dict]:
    """Tool messages answering an assistant message's calls; refusals and exceptions raised by a tool come back as
    errors, as in training (TRL's tool loop answers `{"error": str(exception)}`); the latter are counted under
    `tool_error`."""
    out = []
    table = tools.as_tool_dict()
    for call in message["tool_calls"]:
        name, arguments = call["function"]["name"], call["function"]["arguments"]
        try:
            result = table[name](**arguments)
        except ToolCallError as err:
            result = {"error": str(err)}
        except Exception as err:  # noqa: BLE001 - a tool's own failure is the model's feedback, as in training
            tools.counts[TOOL_ERROR] += 1
            logger.debug("held-out tool %s raised %r", name, err)
            result = {"error": f"{type(err).__name__}: {err}"}
        out.append({"role": "tool", "name": name, "content": str(result)})
    return out


@torch.no_grad()
def environment_episodes(
    model,
    tokenizer,
    rows: list[dict],
    env_factory,
    chat_template: str | None = None,
    template_kwargs: dict | None = None,
    max_new_tokens: int = 64,
    max_turns: int = 3,
    max_tool_calls: int = 4,
    batch_size: int = 32,
    sampling: dict | None = None,
    num_samples: int = 1,
    seed: int = 0,
    success_threshold: float = 1.0,
) -> tuple[list[Episode], Counter]:
    """One `Episode` per (row, sample) with the goal checker's reward as score (success: score >= 
    `success_threshold`), and the malformed-call and tool-error counts seen on the way: greedy (`sampling=None`),
    or `num_samples` sampled episodes per row (`sampling`: temperature, top_p, top_k), episode (r, s) sampled from
    `episode_seed(seed, r, s)`. The global RNG state is left untouched.

    Each turn re-renders the conversation with `chat_template` (the trainer's prefix-preserving one), generates
    up to `max_new_tokens`, parses tool calls, and runs them in the episode's own environment; an episode ends at a
    turn without tool calls or after `max_turns` turns. The model is left in the mode it was in.
    """
    template_kwargs = template_kwargs or {}
    if getattr(tokenizer, "response_template", None) is None and getattr(tokenizer, "response_schema", None) is None:
        tokenizer = add_response_schema(tokenizer)  # as GRPOTrainer does for tool runs, so tool calls can be parsed
    install_strict_parsing(tokenizer)
    was_training = model.training
    model.eval()
    padding_side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    repeats = num_samples if sampling is not None else 1
    ids = [(r, s) for r in range(len(rows)) for s in range(repeats)]
    episodes, counts = [], Counter()
    try:
        with seeded_rng(seed, model.device):
            for start in range(0, len(ids), batch_size):
                chunk = ids[start : start + batch_size]
                seeds = [episode_seed(seed, r, s) for r, s in chunk] if sampling is not None else None
                rewards = _play_chunk(
                    model, tokenizer, [rows[r] for r, _ in chunk], env_factory, chat_template, template_kwargs,
                    sampling, seeds, max_new_tokens, max_turns, max_tool_calls, counts,
                )
                for k, (r, s) in enumerate(chunk):
                    score = finite_or_none(rewards[k])
                    episodes.append(Episode(
                        r, s, None if seeds is None else seeds[k], score,
                        success=None if score is None else score >= success_threshold,
                        unscorable_reason=f"goal checker returned {rewards[k]!r}" if score is None else None,
                    ))
    finally:
        tokenizer.padding_side = padding_side
        model.train(was_training)
    return episodes, counts


def environment_success(*args, episodes: list | None = None, **kwargs) -> tuple[float, Counter]:
    """Mean goal-checker reward over the scorable episodes of `environment_episodes(...)` (NaN when none is
    scorable), and the malformed-call counts. The episodes are appended to `episodes` when it is given."""
    played, counts = environment_episodes(*args, **kwargs)
    if episodes is not None:
        episodes.extend(played)
    mean = summarize(played).mean
    return (float("nan") if mean is None else mean), counts


def _play_chunk(
    model, tokenizer, chunk, env_factory, chat_template, template_kwargs, sampling, seeds, max_new_tokens, max_turns,
    max_tool_calls, counts,
) -> list:
    """Play one batch of episodes to the end; return their goal-checker rewards (as returned: None and NaN too)."""
    envs = [env_factory() for _ in chunk]
    for env, row in zip(envs, chunk, strict=True):
        env.reset(**row)
    tools = [EpisodeTools(environment_tools(env), counts, max_tool_calls) for env in envs]
    conversations = [list(row["prompt"]) for row in chunk]
    active = list(range(len(chunk)))
    for turn in range(max_turns):
        if not active:
            break
        prompt_ids = [
            tokenizer.apply_chat_template(
                conversations[i],
                tools=list(tools[i].tools.values()),
                chat_template=chat_template,
                add_generation_prompt=True,
                tokenize=True,
                return_dict=False,
                **template_kwargs,
            )
            for i in active
        ]
        width = max(len(p) for p in prompt_ids)
        room = model.config.max_position_embeddings - width
        if room <= 0:  # the conversation outgrew the model's context: these episodes end here
            break
        input_ids = torch.tensor([[tokenizer.pad_token_id] * (width - len(p)) + list(p) for p in prompt_ids])
        attention = (torch.arange(width) >= torch.tensor([[width - len(p)] for p in prompt_ids])).long()
        generate_kwargs = (
            {"do_sample": False}
            if sampling is None
            else seeded_sampling_kwargs(sampling, [stream_seed(seeds[i], turn) for i in active])
        )
        out = model.generate(
            input_ids=input_ids.to(model.device),
            attention_mask=attention.to(model.device),
            max_new_tokens=min(max_new_tokens, room),
            **generate_kwargs,
        )
        still_active = []
        for k, i in enumerate(active):
            ids = out[k, width:].tolist()
            ids = ids[: ids.index(tokenizer.eos_token_id) + 1] if tokenizer.eos_token_id in ids else ids
            message = parse_response(
                tokenizer, ids, prefix=list(prompt_ids[k]), tools=list(tools[i].tools.values())
            )
            conversations[i].append(message)
            if message.get("tool_calls"):
                conversations[i].extend(_run_calls(message, tools[i]))
                still_active.append(i)
        active = still_active
    return [env.get_reward() for env in envs]
