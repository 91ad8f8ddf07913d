"""A written working before each call: the text of an assistant turn before its tool call, one entry per listed
option, `k s` (`1 22, 2 5, 3 45`), s the option's one-step score (`Option.score`: its gain, half its information gain
and its exploration term, as the reward weighs them) as a whole percentage, the numbers spelt as the reply spells
its own. Lee et al. 2023 ("Teaching Arithmetic to Small Transformers"): a small transformer learns a computation from
examples that write its intermediate steps far sooner than from the answers alone; here the step is each option's
weighing, written where the option's numbers are, so that the call is left to pick the largest written number.

Written only into the imitation ceiling's traces (`starting_policy build --imitated one_step --working scores`):
the scores are the one-step rule's own, which the shipped policy, imitating the teacher, never sees."""

from __future__ import annotations

WORKINGS = ("none", "scores")


def scores_working(belief) -> str:
    """The working for the options `belief` lists; empty where their effects are unknown."""
    if belief is None or not belief.known:
        return ""
    return ", ".join(f"{k} {round(100 * o.score)}" for k, o in enumerate(belief.options, start=1))


class WritingPolicy:
    """A scripted policy that also writes the working of each call it makes (`workings`, in order)."""

    def __init__(self, policy, working: str):
        if working not in WORKINGS:
            raise ValueError(f"working must be one of {WORKINGS}, got {working!r}")
        self.policy, self.working, self.workings = policy, working, []

    def __call__(self, env, rng):
        call = self.policy(env, rng)
        if call is not None:
            self.workings.append(scores_working(env.belief) if self.working == "scores" else "")
        return call
