"""The multi-turn tool loop every held-out evaluation plays: episodes as TRL 1.16's GRPOTrainer samples them.

Per episode: a fresh environment from the factory, reset with the row (`reset(env, row, sample)`, by default
`env.reset(**row)` as TRL calls it); what reset returns (a string, or None) is appended to the row prompt's last
message, as TRL appends it. The prompt is rendered once with the tools (the environment's public methods) and the
trainer's chat template; then per round the model generates one turn, ended as the trainer's sampler ends it
(training/tool_use/turn_end.py: at EOS, at its call's closing token with the template's tail appended, or at
`max_turn_tokens`), the turn is parsed with TRL's
`parse_response` behind the strict parser (training/tool_use/tool_calls.py), its calls run through `EpisodeTools`
(schema checks, the per-episode call limit; refusals come back as tool errors), and the tool replies are appended as
the template's suffix tokens (`tool_suffix_ids`: concatenation, no re-rendering, TRL's `_get_tool_suffix_ids`). An
episode ends at a turn without a call, after `max_iterations` rounds of calls, or when the next tool reply would push
the completion past `max_completion_length` or the sequence past the model's context (the calls of that round have
already run, as in TRL).

A tool that raises answers the model with `{"error": str(exception)}`, as TRL's loop does; an exception other than
a schema refusal is counted on the episode (`tool_errors`). Sampled episodes (`EpisodeSettings.sampling`) draw their
tokens from their own stream, `episode_seed(seed, row, sample)` (training/evaluation/episode_streams.py), so that an
episode's tokens do not depend on which episodes share its batch and two models evaluated with the same seed are
paired in sampling noise; greedy episodes have no seed. The global random state is left as it was.
"""

from __future__ import annotations

import inspect
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import torch
from trl.chat_template_utils import (
    add_response_schema,
    get_training_chat_template,
    is_chat_template_prefix_preserving,
    parse_response,
)

from training.evaluation.episode_settings import EpisodeSettings
from training.evaluation.episode_streams import seeded_sampling_kwargs
from training.evaluation.pairing_seeds import stream_seed
from training.evaluation.pairing_seeds import episode_seed
from training.evaluation.heldout_reward import seeded_rng
from training.evaluation.progress import episode_bar
from training.tool_use.choices import choices_reader
from training.tool_use.state_keys import state_reader
from training.tool_use.tool_calls import EpisodeTools, ToolCallError, install_strict_parsing
from training.tool_use.turn_end import TurnEnd, resolved_limit, turn_end
from training.tool_use.turn_cache import TurnCache


@dataclass
class PlayedEpisode:
    """One finished episode: its id (row, sample), its sampling seed (None: greedy), its environment (read it for
    the reward, the record), the tool-layer refusals by kind, the tool exceptions, the completion's tokens, where each
    model turn starts in them, and the tools it called through (`episode_tools`: each call's turn and, where the
    environment names its state, the state it was made in), and whether it ended at `max_completion_length` or the
    model's context (`at_limit`)."""

    row: int
    sample: int
    seed: int | None
    env: object
    malformed: Counter
    tool_errors: int = 0
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    tools: list = field(default_factory=list)
    table: dict = field(default_factory=dict)
    turn_spans: list[tuple[int, int]] = field(default_factory=list)  # each model turn's tokens in `completion_ids`
    episode_tools: EpisodeTools | None = None
    at_limit: bool = False  # ended because its completion or sequence reached a limit, not by the model or the loop

    @property
    def turns(self) -> int:
        """Model turns taken (replayed ones included)."""
        return len(self.turn_spans)

    def turn_ids(self, turn: int) -> list[int]:
        """The tokens the model wrote in `turn` (its call and the template's tail, not the tool replies after it)."""
        start, end = self.turn_spans[turn]
        return self.completion_ids[start:end]


def sampling_chat_template(tokenizer) -> str | None:
    """The template TRL's GRPOTrainer renders tool conversations with (None: the tokenizer's own)."""
    return None if is_chat_template_prefix_preserving(tokenizer) else get_training_chat_template(tokenizer)


def environment_tools(env) -> dict:
    """`{name: bound method}` of an environment instance, the tools TRL would expose for it."""
    return {
        name: getattr(env, name)
        for name, _ in inspect.getmembers(type(env), predicate=inspect.isfunction)
        if not name.startswith("_") and name not in ("reset", "get_reward")
    }


def tool_suffix_ids(tokenizer, chat_template, template_kwargs: dict, tool_messages: list[dict]) -> list[int]:
    """The tokens the template puts after an assistant turn's EOS for `tool_messages` and the next assistant
    header: TRL's `_get_tool_suffix_ids`, as a function."""
    dummy = [{"role": "user", "content": "dummy"},
             {"role": "assistant", "content": "",
              "tool_calls": [{"type": "function", "function": {"name": tool_messages[0]["name"], "arguments": {}}}]}]
    render = dict(tokenize=True, chat_template=chat_template, return_dict=False, **template_kwargs)
    prefix = tokenizer.apply_chat_template(dummy, add_generation_prompt=False, **render)
    full = tokenizer.apply_chat_template(dummy + tool_messages, add_generation_prompt=True, **render)
    eos = [i for i, t in enumerate(prefix) if t == tokenizer.eos_token_id]
    if eos:
        prefix = prefix[: eos[-1] + 1]
    if full[: len(prefix)] != prefix:
        raise ValueError("the chat template's tool suffix is not a continuation of its assistant turn")
    return list(full[len(prefix):])


def _run_calls(message: dict, episode: PlayedEpisode) -> list[dict]:
    """Tool messages for an assistant message's calls, as TRL's loop builds them (errors become {"error": ...})."""
    out = []
    for call in message["tool_calls"]:
        name = call["function"]["name"]
        try:
            if name not in episode.table:
                raise ValueError(f"Tool {name} not found.")
            result = episode.table[name](**call["function"]["arguments"])
        except ToolCallError as err:  # a schema refusal, already counted by kind in `malformed`
            result = {"error": str(err)}
        except Exception as err:  # noqa: BLE001 - what TRL's loop does with a tool's exception: the model reads it
            episode.tool_errors += 1
            result = {"error": str(err)}
        out.append({"role": "tool", "name": name, "content": str(result)})
    return out


def _default_reset(env, row: dict, sample: int):
    return env.reset(**row)


def _start(env_factory, row: dict, index: int, sample: int, seed: int | None, reset, tokenizer,
           settings: EpisodeSettings, note_choices: bool = False) -> PlayedEpisode:
    env = env_factory()
    observation = reset(env, row, sample)
    prompt = [dict(m) for m in row["prompt"]]
    if observation is not None:
        if not isinstance(observation, str):
            raise TypeError(f"{type(env).__name__}.reset returned {type(observation).__name__}; held-out episodes "
                            "take a string (appended to the prompt's last message, as TRL does) or None")
        prompt[-1]["content"] = prompt[-1]["content"] + observation
    malformed: Counter = Counter()
    tools = environment_tools(env)
    prompt_ids = tokenizer.apply_chat_template(
        prompt, tools=list(tools.values()), chat_template=settings.chat_template, add_generation_prompt=True,
        tokenize=True, return_dict=False, **settings.template_kwargs,
    )
    episode = PlayedEpisode(row=index, sample=sample, seed=seed, env=env, malformed=malformed,
                            prompt_ids=list(prompt_ids), tools=list(tools.values()))
    episode.episode_tools = EpisodeTools(tools, malformed, settings.max_tool_calls, clock=lambda: episode.turns - 1,
                                         state=state_reader(env),
                                         choices=choices_reader(env) if note_choices else None)
    episode.table = episode.episode_tools.as_tool_dict()
    return episode


def _prepared(tokenizer, settings: EpisodeSettings) -> tuple:
    """The tokenizer able to parse tool calls strictly and the settings with the template TRL renders with."""
    if getattr(tokenizer, "response_template", None) is None and getattr(tokenizer, "response_schema", None) is None:
        tokenizer = add_response_schema(tokenizer)  # as GRPOTrainer does for tool runs, so tool calls can be parsed
    install_strict_parsing(tokenizer)
    if settings.chat_template is None:
        settings = replace(settings, chat_template=sampling_chat_template(tokenizer))
    return tokenizer, settings


@torch.no_grad()
def play_episodes(model, tokenizer, rows: list[dict], env_factory, settings: EpisodeSettings,
                  reset: Callable | None = None, batch_size: int = 32, progress: str | None = None,
                  note_choices: bool = False) -> list[PlayedEpisode]:
    """`settings.episodes_per_row` episodes of every row, in order (row 0's first), played to the end (module
    docstring). `reset(env, row, sample)` starts an episode (default `env.reset(**row)`); `progress` labels the bar of
    episodes finished (training/evaluation/progress.py). `note_choices`: each turn's offered choice is noted as in
    training (`EpisodeTools.turn_choices`; what the environment's choices cost to work out). The model is left in the
    mode it was in."""
    tokenizer, settings = _prepared(tokenizer, settings)
    reset = reset or _default_reset
    sampled = settings.sampling is not None
    plan = [(i, k) for i in range(len(rows)) for k in range(settings.episodes_per_row)]
    was_training = model.training
    model.eval()
    played = []
    bar = episode_bar(len(plan), progress)
    try:
        with seeded_rng(settings.seed, model.device):
            for start in range(0, len(plan), batch_size):
                chunk = [
                    _start(env_factory, rows[i], i, k, episode_seed(settings.seed, i, k) if sampled else None,
                           reset, tokenizer, settings, note_choices)
                    for i, k in plan[start : start + batch_size]
                ]
                _play(model, tokenizer, chunk, settings, bar)
                played.extend(chunk)
    finally:
        bar.close()
        model.train(was_training)
    return played


def episode_turn_end(model, tokenizer, settings: EpisodeSettings) -> TurnEnd:
    """How a turn ends in these episodes: the rule TRL's sampler follows under the strict trainer
    (training/features/turn_limits.py), with the same end-of-turn tokens (the tokenizer's EOS first, then the model's
    generation config's, as TRL lists them)."""
    eos_ids = model.generation_config.eos_token_id
    eos_ids = [eos_ids] if isinstance(eos_ids, int) else list(eos_ids or [])
    stops = [tokenizer.eos_token_id, *eos_ids]
    limit, _ = resolved_limit(settings.max_turn_tokens, settings.max_completion_length)
    return turn_end(tokenizer, settings.chat_template, settings.template_kwargs, limit, stops,
                    settings.end_turn_at_call)


def _play(model, tokenizer, episodes: list[PlayedEpisode], settings: EpisodeSettings, bar) -> None:
    with TurnCache(tokenizer.pad_token_id).active(model):  # each turn runs only its new tokens (turn_cache.py)
        _play_turns(model, tokenizer, episodes, settings, bar)


def _play_turns(model, tokenizer, episodes: list[PlayedEpisode], settings: EpisodeSettings, bar) -> None:
    rule = episode_turn_end(model, tokenizer, settings)
    gen = {"pad_token_id": tokenizer.pad_token_id, "eos_token_id": rule.sampler_stops}
    max_len = settings.max_completion_length
    active = list(episodes)
    while active:
        inputs = [ep.prompt_ids + ep.completion_ids for ep in active]
        width = max(len(x) for x in inputs)
        room = max_len - min(len(ep.completion_ids) for ep in active)
        ids = torch.full((len(inputs), width), tokenizer.pad_token_id)
        attention = torch.zeros((len(inputs), width), dtype=torch.long)
        for j, x in enumerate(inputs):
            ids[j, width - len(x):] = torch.tensor(x)
            attention[j, width - len(x):] = 1
        draw = ({"do_sample": False} if settings.sampling is None
                else seeded_sampling_kwargs(settings.sampling, [stream_seed(ep.seed, ep.turns) for ep in active]))
        out = model.generate(input_ids=ids.to(model.device), attention_mask=attention.to(model.device),
                             max_new_tokens=max(min(room, rule.limit), 1), **gen, **draw)[:, width:].tolist()
        still = []
        for ep, new in zip(active, out, strict=True):
            new, _ = rule.finish(new)  # at its first stop, its call's closing token (the tail appended) or the limit
            if take_turn(ep, new, tokenizer, model.config.max_position_embeddings, settings):
                still.append(ep)
        bar.update(len(active) - len(still))
        active = still


def take_turn(ep: PlayedEpisode, new: list[int], tokenizer, context: int, settings: EpisodeSettings) -> bool:
    """The model's turn `new` joins the episode: its calls run and their replies are appended, as TRL's loop does.
    Whether the episode goes on (a call was made, the iteration limit not reached and the replies fit)."""
    new = new[: settings.max_completion_length - len(ep.completion_ids)]
    prefix = ep.prompt_ids + ep.completion_ids
    iteration = ep.turns
    ep.turn_spans.append((len(ep.completion_ids), len(ep.completion_ids) + len(new)))
    ep.completion_ids += new
    ep.at_limit = len(ep.completion_ids) >= settings.max_completion_length
    message = parse_response(tokenizer, new, prefix=prefix, tools=ep.tools) if new else {}
    if not message.get("tool_calls") or iteration >= settings.max_iterations:
        return False
    tool_messages = _run_calls(message, ep)
    suffix = tool_suffix_ids(tokenizer, settings.chat_template, settings.template_kwargs, tool_messages)
    if len(ep.completion_ids) + len(suffix) > settings.max_completion_length or len(prefix) + len(new) + len(
            suffix) >= context:
        ep.at_limit = True
        return False  # TRL drops the reply and ends the episode here; the calls have run
    ep.completion_ids += suffix
    return True


@dataclass(frozen=True)
class Branch:
    """An episode to start from a turn of another: the row (index and dict) and episode `sample` it was played on,
    the model turns to replay first (each a turn's tokens: the episode's own, or a forced call), and the seed its
    own turns draw from (None: greedy)."""

    row_index: int
    row: dict
    sample: int
    turns: tuple[tuple[int, ...], ...]
    seed: int | None


def continue_branches(model, tokenizer, branches: list[Branch], env_factory, settings: EpisodeSettings,
                      reset: Callable | None = None, batch_size: int = 32, play: bool = True) -> list[PlayedEpisode]:
    """Each branch as an episode: started as `play_episodes` starts one (`reset(env, row, sample)`), its turns replayed
    (their calls run in a fresh environment, as the episode's own did), then, with `play`, played on by `model` to
    the end, its sampled turns from `stream_seed(seed, turn)`. A branch whose replayed turns ended the episode is
    returned as it stands. The model is left in the mode it was in."""
    tokenizer, settings = _prepared(tokenizer, settings)
    reset = reset or _default_reset
    was_training = model.training
    model.eval()
    played = []
    try:
        with seeded_rng(settings.seed, model.device):
            _continue(model, tokenizer, branches, env_factory, settings, reset, batch_size if play else len(branches),
                      played, play)
    finally:
        model.train(was_training)
    return played


def _continue(model, tokenizer, branches, env_factory, settings, reset, batch_size, played, play) -> None:
    for start in range(0, len(branches), batch_size):
        chunk, going = [], []
        for branch in branches[start : start + batch_size]:
            ep = _start(env_factory, branch.row, branch.row_index, branch.sample, branch.seed, reset, tokenizer,
                        settings)
            alive = all(take_turn(ep, list(turn), tokenizer, model.config.max_position_embeddings, settings)
                        for turn in branch.turns)
            chunk.append(ep)
            if alive:
                going.append(ep)
        if going and play:
            with torch.no_grad():
                _play(model, tokenizer, going, settings, episode_bar(len(going), None))
        played.extend(chunk)
