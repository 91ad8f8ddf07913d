"""Credit correctness: does each advantage estimator point where the policy's own option values point?

    python -m benchmarks.credit_correctness --split data/causal/heldout.jsonl --out runs/credit/main
    python -m benchmarks.credit_correctness --split CBO_ROWS/heldout.jsonl --surrogate additive --out runs/credit/cbo
    python -m benchmarks.credit_correctness ... --adapter RUN_DIR     # a trained policy instead of the starting one

What it does, on the first `--groups` rows of a held-out split:

1. Groups as GRPO samples them: `--group_size` sampled episodes of each row from the row's own seed (one state at
   the start, common noise), played by the policy through the one tool loop (training/evaluation/tool_loop.py).
2. Each estimator's advantage for every call of those groups (the same functions the trainer runs): `episode`
   (GRPO's), `turn` (`call_credit`: reward-to-go, a baseline per turn index), `state` (GRPO's plus the step group's
   term, training/algorithms/step_advantages.py), `state_std` (the same with GiGPO's std within each step group),
   `turn+state` (`call_credit` plus the step term), `state+branch` / `turn+state+branch` (the step groups pooled
   with `--branches` continuations the policy samples from each state after the first turn: value samples); at the
   valued states (below), `myopic` (the call's own reward minus the policy's expected own reward over the listed
   options) and `choice` (what `choice_credit` gives the call: that, over the batch's scale, plus the later calls'
   credit at a decision; `call_credit`'s elsewhere).
3. The truth, on `--states` states drawn from the groups' calls (seeded): the state replayed, each option its reply
   listed forced as the next call and the policy played on, `--rollouts` times each (Q of the option), and the
   policy played on from the state unforced as often (V); a call the group made that is no listed option is
   forced too. A call's true advantage is Q(state, its call) - V(state), returns weighted as the recipe weighs them.
4. Per estimator, over the calls made at those states: the share whose advantage has the sign of the true one
   (calls with a nonzero estimate and a nonzero truth), and Spearman's rank correlation with it
   (`scipy.stats.spearmanr`). Beside: the mean over states of max_o Q - V (what the policy leaves on the table by
   its choice at that state) and how often the policy's sampled calls made the best option.

Writes `OUT/credit.json` (every state, option value and call) and prints the table.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch
from scipy import stats

from benchmarks.credit_estimators import estimates, table_steps
from training.algorithms.turn_advantages import turn_advantages, turn_advantages_and_scales
from training.features.choice_credit import ChoiceCredit
from training.evaluation.episode_settings import EpisodeSettings
from training.evaluation.pairing_seeds import seed_word
from training.evaluation.spec import load_policy, spec_from_recipe
from training.evaluation.tool_loop import Branch, continue_branches, episode_turn_end, play_episodes
from training.features.forcing import policy_logps, tool_call_text
from training.run_setup.models import resolve_model_path
from training.run_setup.prompt_datasets import load_rows
from training.tasks.causal.env import make_causal_env
from training.tasks.causal.reward_components import DEFAULT_WEIGHTS
from training.tasks.causal.episode_source import CAUSAL_RECIPE

BRANCH_SEED_KEY = 0xB7A
TRUTH_SEED_KEY = 0x7247


@dataclass
class PlayedTurns:
    """One played episode by model turn: each turn's weighted reward, whether its call was refused, the state its
    call was made in (None: no call), and its tokens."""

    rewards: list[float]
    refused: list[bool]
    keys: list
    tokens: list[list[int]]
    episode: object = field(repr=False)


def played_turns(ep, weights: dict[str, float]) -> PlayedTurns:
    tools = ep.episode_tools
    rewards = [0.0] * ep.turns
    for turn, terms in zip(tools.forwarded_turns, ep.env.call_rewards, strict=True):
        rewards[turn] += sum(w * terms[name] for name, w in weights.items())
    refused = [t in tools.refused_turns for t in range(ep.turns)]
    keys = [tools.turn_states.get(t) for t in range(ep.turns)]
    return PlayedTurns(rewards, refused, keys, [ep.turn_ids(t) for t in range(ep.turns)], ep)


def return_from(played: PlayedTurns, turn: int) -> float:
    return float(sum(played.rewards[turn:]))


def table(groups: list[list[PlayedTurns]]) -> dict:
    """(B, K) tensors of the groups' turns: rewards, existence, refusals, group ids, and the state keys."""
    flat = [p for g in groups for p in g]
    width = max(len(p.rewards) for p in flat)
    rewards = torch.zeros((len(flat), width), dtype=torch.float64)
    exists, refused = torch.zeros_like(rewards), torch.zeros_like(rewards)
    for i, p in enumerate(flat):
        rewards[i, : len(p.rewards)] = torch.tensor(p.rewards, dtype=torch.float64)
        exists[i, : len(p.rewards)] = 1.0
        refused[i, : len(p.refused)] = torch.tensor(p.refused, dtype=torch.float64)
    group_ids = torch.tensor([g for g, members in enumerate(groups) for _ in members])
    keys = [p.keys + [None] * (width - len(p.keys)) for p in flat]
    return {"rewards": rewards, "exists": exists, "refused": refused, "group_ids": group_ids, "keys": keys,
            "flat": flat}


def forced_turn(tokenizer, rule, option: int) -> tuple[int, ...]:
    ids = tokenizer(tool_call_text("choose", {"option": option}), add_special_tokens=False)["input_ids"]
    return tuple(rule.finish(ids)[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", default="data/causal/heldout.jsonl", help="held-out rows (a .jsonl file)")
    parser.add_argument("--surrogate", default="exact")
    parser.add_argument("--recipe", default=str(CAUSAL_RECIPE))
    parser.add_argument("--adapter", default=None, help="a run or checkpoint directory: its LoRA adapter on top")
    parser.add_argument("--groups", type=int, default=12, help="rows, one group each")
    parser.add_argument("--group_size", type=int, default=4, help="episodes per group (the recipe's num_generations)")
    parser.add_argument("--states", type=int, default=40, help="states whose options are valued")
    parser.add_argument("--rollouts", type=int, default=8, help="continuations per option and for V")
    parser.add_argument("--branches", type=int, default=4, help="value samples per state (the +branch estimators)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    started = time.time()
    spec = spec_from_recipe(args.recipe, build_model=False)
    spec = replace(spec, model_path=resolve_model_path(spec.base_model), adapter=args.adapter)
    model, tokenizer = load_policy(spec)
    settings = replace(EpisodeSettings.from_spec(replace(spec, greedy=False)), episodes_per_row=args.group_size,
                       seed=args.seed)
    weights = dict(zip(spec.reward_funcs, spec.reward_weights or [DEFAULT_WEIGHTS[n] for n in spec.reward_funcs],
                       strict=True))
    env_factory = make_causal_env(args.surrogate)
    rows = load_rows(Path(args.split))[: args.groups]
    print(f"groups: {len(rows)} rows x {args.group_size} episodes", flush=True)
    played = play_episodes(model, tokenizer, rows, env_factory, settings, note_choices=True)
    groups = [[played_turns(ep, weights) for ep in played[g * args.group_size:(g + 1) * args.group_size]]
              for g in range(len(rows))]
    t = table(groups)
    rule = episode_turn_end(model, tokenizer, settings)
    t["own"] = decisions(t, ChoiceCredit(True, tokenizer, rule, "dr_grpo", 1.0, settings.max_completion_length),
                         type(env_factory()).__name__)
    value_samples = branch_values(model, tokenizer, rows, env_factory, settings, t, groups, args, weights)
    est = estimates(t, value_samples)
    truth = true_values(model, tokenizer, rows, env_factory, settings, t, rule, args, weights)
    result = summary(est, truth, t)
    result.update({"command": "python -m benchmarks.credit_correctness " + " ".join(argv or sys.argv[1:]),
                   "seconds": round(time.time() - started, 1)})
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "credit.json").write_text(json.dumps(result, indent=2))
    print_table(result)
    return 0


def branch_values(model, tokenizer, rows, env_factory, settings, t, groups, args, weights) -> dict[int, list[float]]:
    """`--branches` continuations from every state after the first turn of the groups: {step id: their returns}."""
    steps = table_steps(t)
    first: dict[int, tuple[int, int]] = {}  # step id -> (flat index, turn) of a call made there
    for i, p in enumerate(t["flat"]):
        for turn in range(1, len(p.rewards)):
            s = int(steps[i, turn])
            if s >= 0:
                first.setdefault(s, (i, turn))
    branches, owners = [], []
    for s, (i, turn) in first.items():
        p = t["flat"][i]
        for b in range(args.branches):
            branches.append(Branch(p.episode.row, rows[p.episode.row], p.episode.sample, tuple(map(tuple,
                                   p.tokens[:turn])), seed_word(args.seed, BRANCH_SEED_KEY, s, b)))
            owners.append((s, turn))
    print(f"value samples: {len(branches)} continuations from {len(first)} states", flush=True)
    out: dict[int, list[float]] = {}
    for (s, turn), ep in zip(owners, continue_branches(model, tokenizer, branches, env_factory, settings),
                             strict=True):
        out.setdefault(s, []).append(return_from(played_turns(ep, weights), turn))
    return out


def true_values(model, tokenizer, rows, env_factory, settings, t, rule, args, weights) -> list[dict]:
    """The sampled states' option values Q, V, each forced call's own reward and the policy's option probabilities
    (module docstring)."""
    where = state_calls(t)
    rng = np.random.default_rng([args.seed, TRUTH_SEED_KEY])
    chosen = sorted(rng.choice(sorted(where), size=min(args.states, len(where)), replace=False).tolist())
    replayed = continue_branches(model, tokenizer, [_branch(t, rows, *where[s][0], None, ()) for s in chosen],
                                 env_factory, settings, play=False)
    states = [state_to_value(s, ep, where[s], t, tokenizer, rule) for s, ep in zip(chosen, replayed, strict=True)]
    for state, ep in zip(states, replayed, strict=True):
        state["policy"] = option_probabilities(model, tokenizer, ep, state["forced"], settings)
    jobs = [(k, name, _branch(t, rows, *where[state["step"]][0], seed_word(args.seed, TRUTH_SEED_KEY, state["step"],
                                                                             n, m), () if tokens is None else (tokens,)))
            for k, state in enumerate(states) for n, (name, tokens) in enumerate([("V", None), *state["forced"].items()])
            for m in range(args.rollouts)]
    print(f"truth: {len(jobs)} continuations from {len(states)} states", flush=True)
    values: dict[tuple[int, str], list[float]] = {}
    first: dict[tuple[int, str], list[float]] = {}
    for (k, name, _), ep in zip(jobs, continue_branches(model, tokenizer, [j[2] for j in jobs], env_factory,
                                                        settings), strict=True):
        played = played_turns(ep, weights)
        turn = states[k]["turn"]
        values.setdefault((k, name), []).append(return_from(played, turn))
        first.setdefault((k, name), []).append(played.rewards[turn] if len(played.rewards) > turn else 0.0)
    for k, state in enumerate(states):
        names = [*state.pop("forced"), "V"]
        state["Q"] = {n: float(np.mean(values[(k, n)])) for n in names if n != "V"}
        state["Q_se"] = {n: float(np.std(values[(k, n)], ddof=1) / math.sqrt(len(values[(k, n)]))) for n in names}
        state["immediate"] = {n: float(np.mean(first[(k, n)])) for n in names if n != "V"}
        state["V"] = float(np.mean(values[(k, "V")]))
    return states


def state_calls(t) -> dict[int, list[tuple[int, int]]]:
    """{step id: the (rollout, turn) of every call made from that state}."""
    steps = table_steps(t)
    where: dict[int, list[tuple[int, int]]] = {}
    for i, p in enumerate(t["flat"]):
        for turn in range(len(p.rewards)):
            if int(steps[i, turn]) >= 0:
                where.setdefault(int(steps[i, turn]), []).append((i, turn))
    return where


def state_to_value(s: int, ep, calls: list[tuple[int, int]], t, tokenizer, rule) -> dict:
    """What a state's truth forces: each listed option, and each call made there that is no option."""
    i, turn = calls[0]
    if ep.env.state_key != t["keys"][i][turn][1]:  # the replay must reach the state the call was made in
        raise RuntimeError(f"state {s}: replaying {turn} turns reached another state than the episode's")
    options = list(ep.env.belief.options) if ep.env.belief is not None and ep.env.belief.known else []
    forced = {f"option {k}": forced_turn(tokenizer, rule, k) for k in range(1, len(options) + 1)}
    made = []
    for i2, turn2 in calls:
        tokens = tuple(t["flat"][i2].tokens[turn2])
        name = next((n for n, ids in forced.items() if ids == tokens), None) or f"call {i2}.{turn2}"
        forced.setdefault(name, tokens)
        made.append([i2, turn2, name])
    return {"step": s, "row": t["flat"][i].episode.row, "turn": turn, "options": len(options), "forced": forced,
            "made": made}


def option_probabilities(model, tokenizer, ep, forced: dict, settings) -> dict[str, float]:
    """The policy's probability of writing each listed option's call at the state, renormalised over the options."""
    names = [n for n in forced if n.startswith("option ")]
    if not names:
        return {}
    context = ep.prompt_ids + ep.completion_ids
    logps = policy_logps(model, [context] * len(names), [list(forced[n]) for n in names],
                         settings.sampling["temperature"], tokenizer.pad_token_id, model.device)
    totals = torch.tensor([sum(lp) for lp in logps], dtype=torch.float64)
    return dict(zip(names, torch.softmax(totals, dim=0).tolist(), strict=True))


def _branch(t, rows, i: int, turn: int, seed, forced: tuple) -> Branch:
    p = t["flat"][i]
    return Branch(p.episode.row, rows[p.episode.row], p.episode.sample, tuple(map(tuple, p.tokens[:turn])) + forced,
                  seed)


def summary(est: dict, truth: list[dict], t: dict) -> dict:
    """Per estimator, over the calls made at the valued states: sign agreement and Spearman's rho with Q - V."""
    est = {**est, **myopic_estimates(truth, t)}
    calls, gaps, best_share, alignment = [], [], [], []
    for state in truth:
        option_q = {n: q for n, q in state["Q"].items() if n.startswith("option ")}
        if option_q:
            gaps.append(max(option_q.values()) - state["V"])
        if len(option_q) > 2:
            alignment.append(stats.spearmanr([state["immediate"][n] for n in option_q], list(option_q.values()))
                             .statistic)
        for i, turn, name in state["made"]:
            calls.append({"state": state["step"], "flat": i, "turn": turn, "call": name,
                          "delta": state["Q"][name] - state["V"], **{e: float(est[e][i, turn]) for e in est}})
            if option_q:
                best_share.append(state["Q"].get(name) == max(option_q.values()))
    rows = {e: agreement(np.array([c[e] for c in calls]), np.array([c["delta"] for c in calls])) for e in est}
    return {"estimators": rows, "calls": calls, "states": truth, "n_states": len(truth), "n_calls": len(calls),
            "headroom_mean": float(np.mean(gaps)) if gaps else None,
            "best_option_share": float(np.mean(best_share)) if best_share else None,
            "immediate_vs_q_spearman": float(np.nanmean(alignment)) if alignment else None}


def decisions(t: dict, credit: ChoiceCredit, env_name: str) -> torch.Tensor:
    """(B, K) 1 where a turn made one of two or more offered choices as its canonical text writes it (what
    `choice_credit` credits by the expected gradient)."""
    own = torch.zeros_like(t["rewards"])
    for i, p in enumerate(t["flat"]):
        for turn, choice in p.episode.episode_tools.turn_choices.items():
            own[i, turn] = float(credit.decision(tuple(p.tokens[turn]), choice, env_name) is not None)
    return own


def myopic_estimates(truth: list[dict], t: dict) -> dict[str, torch.Tensor]:
    """(B, K) at the valued states' calls (0 elsewhere): `myopic`, the call's own reward minus the policy's expected
    own reward over the listed options (the expected gradient over the options, per call); `choice`, what
    `choice_credit` gives a call (training/features/choice_credit.py): at a decision, that over the group's scale plus
    the later calls' credit (`turn_advantages(..., own_excluded=...)`), elsewhere `call_credit`'s."""
    shape = t["rewards"].shape
    myopic, choice = torch.zeros(shape, dtype=torch.float64), torch.zeros(shape, dtype=torch.float64)
    later, scale = turn_advantages_and_scales(t["rewards"], t["exists"], t["group_ids"], t["refused"], t["own"])
    turn = turn_advantages(t["rewards"], t["exists"], t["group_ids"], t["refused"])
    for state in truth:
        expected = sum(p * state["immediate"][n] for n, p in state["policy"].items())
        for i, step, name in state["made"]:
            myopic[i, step] = state["immediate"][name] - expected
            choice[i, step] = (myopic[i, step] / scale + later[i, step]) if t["own"][i, step] else turn[i, step]
    return {"myopic": myopic, "choice": choice}


def agreement(a: np.ndarray, d: np.ndarray) -> dict:
    both = (a != 0) & (d != 0)
    rho = stats.spearmanr(a, d).statistic if len(a) > 2 and np.ptp(a) > 0 else float("nan")
    return {"sign_agreement": float(np.mean(np.sign(a[both]) == np.sign(d[both]))) if both.any() else None,
            "signed_calls": int(both.sum()), "spearman": float(rho), "nonzero_share": float(np.mean(a != 0))}


def print_table(result: dict) -> None:
    print(f"{result['n_states']} states, {result['n_calls']} calls; mean max_o Q - V {result['headroom_mean']:+.4f}; "
          f"calls that made the best option {result['best_option_share']:.3f}; Spearman of the options' own reward "
          f"with their Q, mean over states with 3 options or more: {result['immediate_vs_q_spearman']}")
    print(f"{'estimator':<20} {'sign agreement':>15} {'signed calls':>13} {'Spearman':>9} {'nonzero':>8}")
    for e, r in result["estimators"].items():
        sign = "-" if r["sign_agreement"] is None else f"{r['sign_agreement']:.3f}"
        print(f"{e:<20} {sign:>15} {r['signed_calls']:>13} {r['spearman']:>+9.3f} {r['nonzero_share']:>8.3f}")


if __name__ == "__main__":
    sys.exit(main())
