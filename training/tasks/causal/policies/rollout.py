"""A reference that plans beyond one call: rollout of the one-step rule under posterior draws (`rollout`).

Bertsekas' rollout: to choose a call, try each of the `candidates` best calls of the one-step rule (the options'
candidates ranked by their one-step expected reward, `Belief.candidates`), and for each play the rest of the episode
with the one-step rule as the base policy, in a world simulated by a posterior draw m of the episode's own surrogate
(DAG and parameters): each simulated call's row is drawn from m, the surrogate's copy is updated with it, and the next
call is the one-step rule's on that copy. A simulated episode earns the reward's four components as the environment
would pay them were m the SCM (`simulated_episode`); each candidate's value is the mean over `draws` draws, shared by
every candidate (common random numbers), and the call is the candidate of largest value. Where the rollout is exact
(m the true SCM) it is never worse than its base policy; here m is a posterior draw, so it measures how much planning
over the calls left is worth under the belief the policy reads, which is the headroom GRPO has beyond the one-step
rule. It reads the surrogate, not only the text, and costs about `candidates x draws x calls left` one-step
evaluations a call: a reference, not a policy to train.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from training.evaluation.pairing_seeds import drawn_seed
from training.tasks.causal.belief import NOISE_SAMPLES, NONLINEAR_GRID, Belief, draw_expectations, grid_values
from training.tasks.causal.policies.policy_registry import register_policy
from training.tasks.causal.reward_components import DEFAULT_WEIGHTS, balanced_accuracy_of, cell, exploration_unit
from training.tasks.causal.surrogates.exact_surrogate import LinearModel

ROLLOUT_CANDIDATES = 3
ROLLOUT_DRAWS = 8


@dataclass
class SimulatedWorld:
    """A posterior draw m taken for the SCM: what it says of E[target | do] on the candidates' grid and the target's
    parents."""

    model: object
    span: float  # m's spread of g(E[target | do]) over the grid
    none: float  # g(E_m[target]) without intervention
    parents: set[str]
    noise: np.ndarray  # the noise vectors of m's expectations (a nonlinear draw's)
    seed: int  # the simulation's generator, the same for every candidate (common random numbers)

    def expected(self, scm, call: tuple[str, float]) -> float:
        """g(E_m[target | do(call)])."""
        sign = 1.0 if scm.goal == "max" else -1.0
        e = draw_expectations(self.model, scm.index[scm.target], np.array([scm.index[call[0]]]), np.array([call[1]]),
                              self.noise)
        return sign * float(e[0])


def simulated_episode(scm, budget: int, world: SimulatedWorld, surrogate, made: list[tuple[str, float]],
                      first, calls_left: int) -> dict[str, float]:
    """The reward components earned by the option `first` then the one-step rule on the simulated posterior,
    `calls_left` calls in all, from the state (`surrogate`, `made`), were `world` the SCM: optimization and parent as
    the environment pays them (against m's expectations and parents), structure the options' expected information
    gain of each call, exploration its new cells. Mutates `surrogate` and `made` (the calls played are appended)."""
    rng = np.random.default_rng(world.seed)
    unit = exploration_unit(scm, budget)
    best = max([world.none, *(world.expected(scm, c) for c in made)])
    cells = {cell(scm, c) for c in made}
    earned = dict.fromkeys(DEFAULT_WEIGHTS, 0.0)
    for k in range(calls_left):
        option = first if k == 0 else Belief.of(surrogate, scm, rng, budget=budget, made=tuple(made)).best
        if option is None:
            break  # effects unknown in the simulation: nothing more to plan on
        before = balanced_accuracy_of(surrogate.posterior().marginals, world.parents)
        e = world.expected(scm, option.call)
        earned["optimization"] += (max(best, e) - best) / world.span if world.span > 0 else 0.0
        best = max(best, e)
        earned["structure"] += option.info or 0.0
        earned["exploration"] += unit * (cell(scm, option.call) not in cells)
        cells.add(cell(scm, option.call))
        j = scm.index[option.variable]
        row = world.model.simulate({j: option.value}, rng.standard_normal((1, scm.d)))
        mask = np.zeros_like(row, dtype=bool)
        mask[:, j] = True
        surrogate.update(row, mask)
        made.append(option.call)
        earned["parent"] += balanced_accuracy_of(surrogate.posterior().marginals, world.parents) - before
    return earned


@register_policy("rollout", order=65)
@dataclass
class RolloutPolicy:
    candidates: int = ROLLOUT_CANDIDATES
    draws: int = ROLLOUT_DRAWS
    name: str = "rollout"

    def __call__(self, env, rng: np.random.Generator) -> tuple[str, dict]:
        belief = env.belief
        if belief is None:
            raise ValueError("rollout: the environment has shown no options yet (call reset first)")
        if not belief.known:
            return "observe", {}
        scm, record = env.scm, env.trace
        left = record.budget - record.used
        ranked = sorted(belief.candidates, key=lambda o: o.score, reverse=True)[: self.candidates]
        if left == 1 or len(ranked) == 1:
            return "intervene", {"variable": belief.best.variable, "value": belief.best.value}
        made = list(record.interventions)
        values = np.zeros(len(ranked))
        for world in self._worlds(env, rng):
            for k, option in enumerate(ranked):
                earned = simulated_episode(scm, record.budget, world, env.surrogate.copy(), list(made), option, left)
                values[k] += sum(DEFAULT_WEIGHTS[c] * v for c, v in earned.items())
        chosen = ranked[int(np.argmax(values))]
        return "intervene", {"variable": chosen.variable, "value": chosen.value}

    def _worlds(self, env, rng: np.random.Generator) -> list[SimulatedWorld]:
        scm = env.scm
        sign = 1.0 if scm.goal == "max" else -1.0
        t = scm.index[scm.target]
        models = env.surrogate.posterior_models(self.draws, rng)
        linear = all(isinstance(m, LinearModel) for m in models)
        grid = [grid_values(*scm.ranges[v], 2 if linear else NONLINEAR_GRID) for v in scm.actionable]
        index = np.concatenate([[scm.index[v]] * len(g) for v, g in zip(scm.actionable, grid)] + [[-1]]).astype(int)
        values = np.concatenate([*grid, [0.0]])
        worlds = []
        for model in models:
            noise = rng.standard_normal((NOISE_SAMPLES, scm.d))
            e = sign * draw_expectations(model, t, index, values, noise)
            worlds.append(SimulatedWorld(model, float(e[:-1].max() - e[:-1].min()), float(e[-1]),
                                         {scm.variables[j] for j in model.parents[t]}, noise,
                                         drawn_seed(rng)))
        return worlds
