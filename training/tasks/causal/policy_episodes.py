"""Held-out evaluation of causal policies: an LM's (or a baseline's) episodes in `CausalEnv`, one record each.

`lm_episodes` plays a language model's episodes exactly as GRPO samples them (TRL 1.16's `_tool_call_loop`): the
row's prompt with reset's text appended to its last message, rendered with the tools (the environment's methods)
and the trainer's chat template; then per turn the model generates until EOS, the turn is parsed with TRL's
`parse_response` behind the strict parser (training/tool_use/tool_calls.py), its calls run through `EpisodeTools`
(schema checks, the per-episode call limit; refusals come back as tool errors, as in training), and the tool replies
are appended as the template's suffix tokens (concatenation, no re-rendering). An episode ends at a turn without a
call, after `max_iterations` rounds of calls, or when the next tool reply would push the completion past
`max_completion_length` or the sequence past the model's context (the calls of that round have already run, as in
TRL). Sampled (`sampling`: temperature, top_p, top_k, e.g. the training ones), or greedy. A sampled episode draws
its tokens from its own random stream, `episode_seed(seed, row, k)` (training/evaluation/episode_streams.py), so
that its tokens do not depend on which episodes share its batch, and two models evaluated with the same seed are
paired in sampling noise as well as in environment noise.

Episodes are paired across policies: episode k of row r resets the environment with seed `environment_seed(r, k)`
(training.tasks.causal.baselines), the seed `run_policy` gives the baselines' episode k. So two policies' episode k on a
row start from the same observational data and draw the same noise for the same calls.

Each record (`episode_record`) holds the row's identity, the policy, the episode's final regret, parent F1 of the
final posterior's MAP parent set, cumulative information gain (nats), final entropy, every reward component and the
weighted reward, the invalid calls by kind (environment refusals) and the malformed calls (tool-layer refusals), the
calls made, the final posterior's parent marginals P(X_j ∈ Pa(target)) (`parent_marginals`), the best E[target | do]
the episode reached (`best_expected`, against the SCM's `optimum` and `goal`) and its valid interventions per variable
(`interventions_on`). `mean_metrics` reduces records to means; `training.tasks.causal.results.summary_table` prints
them per policy.
"""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import torch
from trl.chat_template_utils import add_response_schema, parse_response

from training.evaluation.episode_streams import seeded_sampling_kwargs, stream_seed
from training.evaluation.episodes import episode_seed
from training.evaluation.tool_episodes import environment_tools
from training.tasks.causal.baselines import POLICIES, environment_seed, run_policy
from training.tasks.causal.env import CausalEnv
from training.tasks.causal.reward_components import COMPONENTS, episode_rewards, weighted_reward
from training.tool_use.tool_calls import EpisodeTools, install_strict_parsing

SUMMARY_KEYS = ("regret", "parent_f1", "info_gain", "reward", *COMPONENTS, "invalid_calls", "malformed_calls",
                "calls")


def episode_record(record, row: dict, row_index: int, episode: int, policy: str, weights: dict | None = None,
                   malformed: Counter | None = None) -> dict:
    """One JSON-ready record of a finished episode (`EpisodeRecord`, read through `CausalEnv.record`)."""
    components = episode_rewards(record)
    calls = [{"tool": s.tool, **s.arguments, "valid": s.valid} for s in record.steps]
    malformed = malformed or Counter()
    return {
        "policy": policy, "row": row_index, "episode": episode, "env_seed": environment_seed(row, episode),
        "scm_seed": row.get("scm_seed"), "family": row.get("family"), "mechanism": row.get("mechanism"),
        "n_vars": row.get("n_vars"), "budget": record.budget,
        "regret": record.regret, "parent_f1": record.parent_f1, "info_gain": record.info_gain,
        "final_entropy": record.final_entropy, "reward": weighted_reward(components, weights), **components,
        "invalid_calls": float(sum(record.invalid.values())), "invalid": dict(record.invalid),
        "malformed_calls": float(sum(malformed.values())), "malformed": dict(malformed),
        "calls": float(record.used), "call_log": calls,
        "parent_marginals": dict(record.final_posterior.marginals),
        "goal": record.scm.goal, "best_expected": record.best_expected, "optimum": record.optimum,
        "interventions_on": dict(Counter(s.intervention[0] for s in record.steps if s.intervention is not None)),
    }


def baseline_episodes(name: str, rows: list[dict], episodes: int, surrogate: str = "exact",
                      weights: dict | None = None) -> list[dict]:
    """Records of baseline `name` (a `POLICIES` name) on every row, episodes 0 .. episodes-1."""
    if name not in POLICIES:
        raise ValueError(f"baseline: must be one of {sorted(POLICIES)}, got {name!r}")
    policy = POLICIES[name]()
    out = []
    for i, row in enumerate(rows):
        for k in range(episodes):
            out.append(episode_record(run_policy(policy, row, k, surrogate), row, i, k, name, weights))
    return out


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


def _run_calls(message: dict, table: dict) -> list[dict]:
    """Tool messages for an assistant message's calls, as TRL's loop builds them (errors become {"error": ...})."""
    out = []
    for call in message["tool_calls"]:
        name = call["function"]["name"]
        try:
            if name not in table:
                raise ValueError(f"Tool {name} not found.")
            result = table[name](**call["function"]["arguments"])
        except Exception as err:  # what TRL's loop does with any tool exception: the model reads it
            result = {"error": str(err)}
        out.append({"role": "tool", "name": name, "content": str(result)})
    return out


class _Episode:
    def __init__(self, env, row: dict, prompt_ids: list[int], tools: list, max_calls: int, seed: int):
        self.env, self.row, self.prompt_ids, self.tools, self.seed = env, row, prompt_ids, tools, seed
        self.malformed: Counter = Counter()
        self.table = EpisodeTools(environment_tools(env), self.malformed, max_calls).as_tool_dict()
        self.completion: list[int] = []


@torch.no_grad()
def lm_episodes(model, tokenizer, rows: list[dict], *, episodes: int = 1, sampling: dict | None = None, seed: int = 0,
                env_factory=CausalEnv, chat_template: str | None = None, template_kwargs: dict | None = None,
                max_completion_length: int = 720, max_iterations: int = 7, max_tool_calls: int = 7,
                batch_size: int = 32, policy: str = "lm", weights: dict | None = None) -> list[dict]:
    """Records of `episodes` episodes per row played by `model` (see the module docstring). `sampling=None` is
    greedy; otherwise temperature, top_p and top_k, episode (row i, k) sampled from the stream of
    `episode_seed(seed, i, k)`. The model is left in the mode it was in."""
    template_kwargs = dict(template_kwargs or {})
    if getattr(tokenizer, "response_template", None) is None and getattr(tokenizer, "response_schema", None) is None:
        tokenizer = add_response_schema(tokenizer)
    install_strict_parsing(tokenizer)
    eos_ids = model.generation_config.eos_token_id
    eos_ids = [eos_ids] if isinstance(eos_ids, int) else list(eos_ids or [tokenizer.eos_token_id])
    gen = {"pad_token_id": tokenizer.pad_token_id, "eos_token_id": eos_ids}
    context = model.config.max_position_embeddings
    plan = [(i, k) for i, _ in enumerate(rows) for k in range(episodes)]
    was_training = model.training
    model.eval()
    records = []
    try:
        for start in range(0, len(plan), batch_size):
            chunk = plan[start : start + batch_size]
            eps = [_start(env_factory, rows[i], k, tokenizer, chat_template, template_kwargs, max_tool_calls,
                          episode_seed(seed, i, k)) for i, k in chunk]
            _play(model, tokenizer, eps, gen, sampling, eos_ids, chat_template, template_kwargs,
                  max_completion_length, max_iterations, context)
            for (i, k), ep in zip(chunk, eps, strict=True):
                records.append(episode_record(ep.env.record, rows[i], i, k, policy, weights, ep.malformed))
    finally:
        model.train(was_training)
    return records


def _start(env_factory, row, k, tokenizer, chat_template, template_kwargs, max_tool_calls, seed) -> _Episode:
    env = env_factory()
    text = env.reset(**{**row, "seed": environment_seed(row, k)})
    prompt = [dict(m) for m in row["prompt"]]
    prompt[-1]["content"] = prompt[-1]["content"] + text
    tools = list(environment_tools(env).values())
    prompt_ids = tokenizer.apply_chat_template(prompt, tools=tools, chat_template=chat_template,
                                               add_generation_prompt=True, tokenize=True, return_dict=False,
                                               **template_kwargs)
    return _Episode(env, row, list(prompt_ids), tools, max_tool_calls, seed)


def _play(model, tokenizer, eps, gen, sampling, eos_ids, chat_template, template_kwargs, max_len, max_iterations,
          context):
    active = list(eps)
    for iteration in range(max_iterations + 1):
        if not active:
            return
        inputs = [ep.prompt_ids + ep.completion for ep in active]
        width = max(len(x) for x in inputs)
        room = max_len - min(len(ep.completion) for ep in active)
        ids = torch.full((len(inputs), width), tokenizer.pad_token_id)
        attention = torch.zeros((len(inputs), width), dtype=torch.long)
        for j, x in enumerate(inputs):
            ids[j, width - len(x):] = torch.tensor(x)
            attention[j, width - len(x):] = 1
        draw = ({"do_sample": False} if sampling is None
                else seeded_sampling_kwargs(sampling, [stream_seed(ep.seed, iteration) for ep in active]))
        out = model.generate(input_ids=ids.to(model.device), attention_mask=attention.to(model.device),
                             max_new_tokens=max(room, 1), **gen, **draw)[:, width:].tolist()
        still = []
        for ep, new in zip(active, out, strict=True):
            cut = next((n + 1 for n, t in enumerate(new) if t in eos_ids), len(new))
            new = new[: min(cut, max_len - len(ep.completion))]
            prefix = ep.prompt_ids + ep.completion
            ep.completion += new
            message = parse_response(tokenizer, new, prefix=prefix, tools=ep.tools) if new else {}
            if not message.get("tool_calls") or iteration == max_iterations:
                continue
            tool_messages = _run_calls(message, ep.table)
            suffix = tool_suffix_ids(tokenizer, chat_template, template_kwargs, tool_messages)
            if len(ep.completion) + len(suffix) > max_len or len(prefix) + len(new) + len(suffix) >= context:
                continue  # TRL drops the reply and ends the episode here; the calls have run
            ep.completion += suffix
            still.append(ep)
        active = still


def mean_metrics(records: list[dict]) -> dict[str, float]:
    """Means over records of the summary keys, plus the number of episodes."""
    if not records:
        raise ValueError("mean_metrics: no records")
    out = {key: float(np.mean([r[key] for r in records])) for key in SUMMARY_KEYS}
    out["episodes"] = float(len(records))
    return out


def write_jsonl(records: list[dict], path) -> None:
    with open(path, "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")

