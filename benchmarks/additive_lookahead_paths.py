"""Which path the additive lookahead's parent-set scores take: the share of the options' (set, data set) pairs that
copy their anchor's score, take the one-new-member path, or take the nested step (split by why: the node's own value
moved, or two or more members are new), over one teacher episode (seed 0, 10 observational rows first), as the
kernel decides it (`additive_nested.lane_groups` and `_group_paths`, called on the same arrays):

    python -m benchmarks.additive_lookahead_paths --cases sachs_nonlinear sempler6

What is left on the nested step is what a faster call has to take off it (issue 69).
"""

from __future__ import annotations

import argparse
from collections import Counter

import numpy as np

from benchmarks.additive_call_profile import profile_episode, Timer
from benchmarks.causal_option_cost import CASES
from training.tasks.causal.surrogates import additive_moments, additive_nested

PATHS = ("copied", "one new member", "nested: own value moved (or an anchor)", "nested: more new members")


def count_paths(plan, own: int, base: np.ndarray, shared, counts: Counter) -> None:
    """Add one node's pairs to `counts` by path, from the kernel's own grouping and path rule."""
    order, starts, ref_of, agree_of = additive_nested.lane_groups(len(base), shared, own // plan.features)
    sets, n_anchors = len(plan.size), len(shared.anchors)
    stored, rows, f = max(int(plan.kept.max()) + 1, 1), plan.features * max(int(plan.size.max()) - 2, 1), plan.features
    lanes = additive_nested.MAX_LANES
    state = additive_nested._Kept(np.zeros((stored, rows, f, lanes)), np.zeros((stored, f, f, lanes)),
                                  np.zeros((stored, f, f, lanes)), np.zeros((stored, f, lanes)),
                                  np.zeros((stored, f, lanes)), np.zeros((stored, lanes)), np.zeros((stored, lanes)))
    by_anchor = additive_nested._Kept(*(np.zeros((max(n_anchors, 1),) + a.shape[:-1]) for a in state))
    computed, copied, one_new = (np.zeros(sets, dtype=np.bool_) for _ in range(3))
    own_bit = 1 << (own // f)
    for g in range(len(starts) - 1):
        group = order[starts[g]:starts[g + 1]]
        ref, agree = int(ref_of[g]), int(agree_of[g])
        same_base = bool(np.all(base[group] == base[group[0]]))
        additive_nested._group_paths(plan.size, plan.prefix, plan.sibling, plan.members, plan.kept, ref, agree,
                                     same_base, by_anchor, state, len(group), computed, copied, one_new)
        anchor_of = shared.anchor_of[group]
        moved = np.any((anchor_of >= 0) & ((shared.agree[group] & own_bit) == 0))
        for s in range(sets):
            if not computed[s]:
                path = PATHS[0]
            elif one_new[s]:
                path = PATHS[1]
            else:
                path = PATHS[2] if moved or ref < 0 else PATHS[3]
            counts[path] += len(group)


def episode_paths(scm, calls: int) -> Counter:
    counts = Counter()
    inner = additive_moments.node_scores

    def counted(plan, own, prior_var, m2, base, count, mean, delta, weight, shared=None):
        if shared is not None and len(shared.anchors):
            count_paths(plan, own, base, shared, counts)
        return inner(plan, own, prior_var, m2, base, count, mean, delta, weight, shared)

    additive_moments.node_scores = counted
    try:
        profile_episode(scm, 0, calls, Timer())
    finally:
        additive_moments.node_scores = inner
    return counts


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="*", default=["sachs_nonlinear", "sempler6"],
                        choices=[k for k, v in CASES.items() if v[1] == "additive"])
    parser.add_argument("--calls", type=int, default=6)
    args = parser.parse_args(argv)
    print("| case | pairs | " + " | ".join(PATHS) + " |")
    print("| --- | ---: | " + " | ".join("---:" for _ in PATHS) + " |")
    for name in args.cases:
        counts = episode_paths(CASES[name][0](), args.calls)
        total = sum(counts.values())
        print(f"| {name} | {total} | " + " | ".join(f"{100 * counts[p] / total:.1f}%" for p in PATHS) + " |",
              flush=True)


if __name__ == "__main__":
    main()
