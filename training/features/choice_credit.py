"""`choice_credit`: where a turn made one of the calls its environment offered, the choice token is credited by the
expected gradient over every offered choice (their own rewards known, not sampled), and by the sampled return of the
calls after it (the maths: training/algorithms/choice_gradient.py). On top of `call_credit`, which it needs.

What it needs from the environment: a `choices` property (training/tool_use/choices.py), read by the tool layer just
before each turn's first call (`EpisodeTools.turn_choices`). The offered calls must be written alike but for one
token (their canonical text, `tool_call_text`, as the sampler ends a turn): that token is the choice token. A turn
whose tokens are the canonical text of the call it made is a decision at that token; one written otherwise keeps its
`call_credit` advantage only (counted: `choice_credit/unmatched_turns`).

What it does, per generation batch (`attach`): the choice token's advantage becomes the call credit of what the later
calls earned (`turn_advantages(..., own_excluded=...)`: the turn's return without its own reward, against the
group's same); `choice_tokens` and `choice_values` (B, C, J) join the batch: at each choice token, the offered
tokens and each one's own weighted reward, centred over the offered and divided by the batch's scale of those
returns (pooled over the groups: a group whose rollouts earned alike says nothing of how far apart its options'
rewards are, and dividing by its near-zero spread blew the term up a thousandfold). In the
loss (`loss`), the final hidden states that predict the choice tokens (captured from TRL's loss forward) and the LM
head's rows of the offered tokens give the policy's probabilities over them, and -sum_o pi(o) v_o, with each token's
weight in TRL's loss (`token_weights`; forced rows and tokens out of the loss mask weigh 0), joins the loss.

Metrics: `choice_credit/decisions` (the share of model turns that made one of two or more offered choices, as written),
`choice_credit/options` (choices offered a decision, mean), `choice_credit/unmatched_turns`, and in the loss
`choice_credit/loss`, `choice_credit/best_option_prob` (the policy's probability of the decision's best choice, mean)
and `choice_credit/advantage_left` (the best choice's value minus the policy's expected one, in the advantages' units,
mean: what its choices leave of their own reward).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from training.algorithms.choice_gradient import LOSS_TYPES, choice_loss, token_weights
from training.algorithms.trajectory import loss_mask
from training.algorithms.turn_advantages import turn_advantages_and_scales
from training.features.call_credit import TurnTable
from training.features.final_hidden_state import hook_final_hidden_state, transformers_model
from training.features.forcing import tool_call_text
from training.tool_use.choices import choices_reader, offers_choices

MAX_CHOICES = 32  # offered choices a decision may have: the width J of the batch's choice keys


class ChoiceCreditError(RuntimeError):
    """What choice credit needs from the environment, the recipe or the model is missing."""


class ChoiceCredit:
    def __init__(self, enabled: bool, tokenizer, turn_end, loss_type: str, temperature: float,
                 max_completion_length: int, model=None):
        self.enabled = enabled
        self._captured: list | None = None
        if not enabled:
            return
        if loss_type not in LOSS_TYPES:
            raise ChoiceCreditError(f"choice_credit weighs its term as TRL's loss weighs a token, known for loss_type "
                                    f"{', '.join(LOSS_TYPES)}; got {loss_type!r}")
        self.tokenizer, self.turn_end, self.loss_type, self.temperature = tokenizer, turn_end, loss_type, temperature
        self.tail = list(turn_end.tail) if turn_end is not None else []
        self.max_completion_length = max_completion_length
        self._written: dict[str, tuple[int, ...]] = {}
        if model is not None:
            hook_final_hidden_state(model, self._capture)

    # ---- generation -------------------------------------------------------------------------------------------------
    def readers(self, environments: list) -> list | None:
        """Per rollout, what reads its environment's choices (`EpisodeTools`' `choices`); None when off."""
        if not self.enabled:
            return None
        missing = sorted({type(env).__name__ for env in environments if not offers_choices(env)})
        if missing:
            raise ChoiceCreditError(f"choice_credit: {', '.join(missing)} has no `choices` property (the calls it "
                                    "offers and what each would earn; training/tool_use/choices.py)")
        return [choices_reader(env) for env in environments]

    def attach(self, batch: dict, table: TurnTable, episode_tools: list, environments: list, weights: dict,
               group_size: int, accelerator, metrics: dict) -> None:
        """Find the choice tokens; set their advantage to the later calls' credit and add the choice keys."""
        decisions = self._decisions(batch, table, episode_tools, environments, metrics)
        own = torch.zeros_like(table.rewards)
        for i, turn, *_ in decisions:
            own[i, turn] = 1.0
        all_rewards, all_exists = accelerator.gather(table.rewards), accelerator.gather(table.exists)
        group_ids = torch.arange(all_rewards.size(0), device=own.device) // group_size
        later, scale = turn_advantages_and_scales(all_rewards, all_exists, group_ids,
                                                  accelerator.gather(table.refused), accelerator.gather(own))
        later = later[table.start : table.start + own.size(0)]
        shape = (*batch["completion_ids"].shape, MAX_CHOICES)
        tokens = torch.full(shape, -1, dtype=torch.long, device=own.device)
        values = torch.zeros(shape, dtype=torch.float32, device=own.device)
        for i, turn, position, offered, terms in decisions:
            own_rewards = torch.tensor([sum(w * t[n] for n, w in weights.items()) for t in terms])
            tokens[i, position, : len(offered)] = torch.tensor(offered)
            values[i, position, : len(offered)] = (own_rewards - own_rewards.mean()) / float(scale)
            batch["advantages"][i, position] = later[i, turn]
        batch["choice_tokens"], batch["choice_values"] = tokens, values

    def _decisions(self, batch, table, episode_tools, environments, metrics) -> list[tuple]:
        """(rollout, turn, completion position, offered tokens, terms) of each turn that made an offered choice as
        its canonical text writes it."""
        out, unmatched = [], 0
        model_turns = int((table.turns.max(dim=1).values + 1).clamp(min=0).sum())
        for i, tools in enumerate(episode_tools):
            for turn, choice in sorted(tools.turn_choices.items()):
                start, tokens = self._turn_tokens(batch, table.turns, i, turn)
                found = self.decision(tokens, choice, type(environments[i]).__name__)
                if found is None:
                    unmatched += len(choice.calls) > 1
                    continue
                position, offered = found
                out.append((i, turn, start + position, offered, choice.terms))
        metrics["choice_credit/decisions"].append(len(out) / max(model_turns, 1))
        metrics["choice_credit/unmatched_turns"].append(float(unmatched))
        if out:
            metrics["choice_credit/options"].append(sum(len(d[3]) for d in out) / len(out))
        return out

    def decision(self, tokens: tuple[int, ...], choice, env_name: str) -> tuple[int, list[int]] | None:
        """(position in the turn, the offered tokens) where a turn written as `tokens` made `choice` as its canonical
        text writes it, among two or more offered; None otherwise."""
        if len(choice.calls) < 2:
            return None  # one choice offered: nothing to choose between
        written = [self._canonical(call) for call in choice.calls]
        position = self._choice_position(written, env_name)
        if tuple(tokens) != written[choice.made]:
            return None
        return position, [w[position] for w in written]

    def _canonical(self, call: dict) -> tuple[int, ...]:
        """The tokens of a call as the model writes it and the sampler ends its turn."""
        text = tool_call_text(call["name"], call["arguments"])
        if text not in self._written:
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            self._written[text] = tuple(self.turn_end.finish(ids)[0] if self.turn_end is not None else ids)
        return self._written[text]

    @staticmethod
    def _choice_position(written: list[tuple[int, ...]], env_name: str) -> int:
        if len(written) > MAX_CHOICES:
            raise ChoiceCreditError(f"choice_credit: {env_name} offered {len(written)} choices, more than "
                                    f"{MAX_CHOICES}")
        differ = {k for w in written for k in range(len(w)) if len(w) != len(written[0]) or w[k] != written[0][k]}
        if len(differ) != 1:
            raise ChoiceCreditError(f"choice_credit: {env_name}'s choices are not written alike but for one token "
                                    f"(their tokens differ at {sorted(differ)[:5]}): {len(written)} calls")
        return differ.pop()

    def _turn_tokens(self, batch: dict, turns: torch.Tensor, i: int, turn: int) -> tuple[int, tuple[int, ...]]:
        """(start, tokens) of rollout i's model turn in the completion, with the tail the sampler appended."""
        where = (turns[i] == turn).nonzero().flatten()
        if where.numel() == 0:
            return 0, ()
        ids = batch["completion_ids"][i].tolist()
        start, end = int(where[0]), int(where[-1]) + 1
        if self.tail and ids[end : end + len(self.tail)] == self.tail:
            end += len(self.tail)
        return start, tuple(ids[start:end])

    # ---- loss -------------------------------------------------------------------------------------------------------
    def _capture(self, hidden: torch.Tensor | None) -> None:
        if self._captured is not None and hidden is not None:
            self._captured.append(hidden)

    @contextlib.contextmanager
    def capturing(self) -> Iterator[None]:
        """Capture the final hidden states of the forward run inside the block (the loss's)."""
        self._captured = [] if self.enabled else None
        yield

    def loss(self, model, batch: dict, metrics: dict, accumulation: int, num_processes: int,
             steps_per_generation: int) -> torch.Tensor | None:
        """-sum over the micro-batch's choice tokens of sum_o pi(o) v_o, each token weighted as TRL's loss weighs it."""
        captured, self._captured = self._captured, None
        if not self.enabled:
            return None
        if not captured:
            raise ChoiceCreditError("choice_credit: the loss forward captured no hidden states")
        hidden = torch.cat(captured, dim=0)[:, -batch["completion_ids"].size(1) - 1 : -1]
        at = (batch["choice_tokens"] >= 0).any(dim=-1)  # (B, C)
        weight = token_weights(self.loss_type, loss_mask(batch), self.max_completion_length, accumulation,
                               batch.get("num_items_in_batch"), num_processes, steps_per_generation)
        head = transformers_model(model).get_output_embeddings().weight
        if head.numel() == 0:
            raise ChoiceCreditError("choice_credit reads the LM head's rows of the offered tokens; under DeepSpeed "
                                    "ZeRO-3 the head is partitioned (use ZeRO-2, or choice_credit: false)")
        loss, pi = choice_loss(hidden[at], head, batch["choice_tokens"][at], batch["choice_values"][at], weight[at],
                               self.temperature)
        self._log(pi, batch["choice_values"][at], batch["choice_tokens"][at], loss, metrics)
        return loss

    @staticmethod
    def _log(pi, values, tokens, loss, metrics) -> None:
        if pi.numel() == 0:
            return
        offered = tokens >= 0
        best = values.masked_fill(~offered, float("-inf")).max(dim=-1)
        metrics["choice_credit/loss"].append(float(loss.detach()))
        metrics["choice_credit/best_option_prob"].append(float(pi.detach().gather(1, best.indices.unsqueeze(1)).mean()))
        left = best.values - (pi.detach() * values.masked_fill(~offered, 0.0)).sum(dim=-1)
        metrics["choice_credit/advantage_left"].append(float(left.mean()))
