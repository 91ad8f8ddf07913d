"""The seed rule: which seed draws what, in one place. Every seed below is a function of a row's seed, an episode's
index, an evaluation seed and a fixed salt, so that two policies played on the same rows meet the same SCMs, the same
noise and (when sampled) the same token streams, whatever batches them.

Rows. Row i of the train split has seed `row_seed("train", i)` = i; row i of the held-out split
`row_seed("heldout", i)` = `HELDOUT_SEED_OFFSET` + i, a range disjoint from the train seeds. This holds for the
bundled splits and for the rows of a user's SCM files or generator (a generator is called with the row's seed).
The row's seed is its `seed` column (the "row seed"; "episode seed" is only the token stream below).

The SCM. A bundled row's SCM is drawn from its row seed: the graph and mechanisms by
`scm.families.random_scm(family, n_vars, row seed, mechanism)`, its size, names, ranges and goal by
`generator(row seed, STYLE_SEED_KEY)`.

The environment's noise. Episode k of a row starts the environment from `environment_seed(row, k)`, a hash of
(row seed, k), whatever plays it (a scripted policy, a language model's held-out episode), so every policy's episode
k starts from the same data and draws the same noise for the same calls. k = None is the row's own episode, what GRPO
plays: TRL's `reset(**row)` hands the environment the row seed itself, unhashed, and the teacher's traces
(`reference_calls_json`) are that episode's calls. Inside an episode seeded s, the environment samples from
`generator(s)`; its option lookahead at valid call c from `generator(s, c, LOOKAHEAD_SEED_KEY)`; its belief after u
updates from `generator(s, u, BELIEF_SEED_KEY)`; a scripted policy from `generator(s, POLICY_SEED_KEY)`; the
starting policy's k-th renaming of a row from `generator(row seed, k, RENAME_SEED_KEY)` (and, with a budget spread,
that episode's budget from `generator(row seed, k, BUDGET_SEED_KEY)`).

The tokens. A language model's sampled episode (row r, sample k) under the evaluation seed `heldout_seed` draws its
tokens from `episode_seed(heldout_seed, r, k)`, its t-th generation call (tool agents take several turns) from
`stream_seed(that seed, t)` (`training.evaluation.episode_streams`). Greedy episodes have no episode seed. Step
credit's k-th continuation in training step s draws from `branch_seed(run seed, s, k)`.

Outside the episodes. The tiny causal model's corpus episode k plays a linear SCM seeded `corpus_scm_seed(k)`, far
from the bundled splits' seeds; the surrogate comparison's k-th data set of its u-th SCM (or of the row seeded u) is
drawn from `data_set_seed(u, k)`; the surrogate speed benchmark's e-th SCM of repeat s is seeded
`benchmark_scm_seed(s, e)`; the bundled larger-number split draws its prompt styles from `styles_seed(its seed)`; the
rollout reference draws each simulated world's generator seed from its own generator (`drawn_seed`).

Two ways of deriving, one hash: `seed_word(*words)` is numpy's `SeedSequence(words)` reduced to one 32-bit word (a
seed handed on, as an int, to something that seeds itself), `generator(*words)` the generator of the same
`SeedSequence` (`np.random.default_rng([words])`; one word gives `default_rng(word)`). Nearby words give unrelated
streams, and a salt (the `*_SEED_KEY`s) keeps two consumers of one seed apart.
"""

from __future__ import annotations

import numpy as np

HELDOUT_SEED_OFFSET = 100_000  # held-out row i has seed HELDOUT_SEED_OFFSET + i, train row i seed i
SPLITS = ("train", "heldout")

STYLE_SEED_KEY = 0x5C3E  # a bundled row's size, names, ranges and goal, apart from its SCM's own generator
LOOKAHEAD_SEED_KEY = 0x100CA  # the options' lookahead, apart from the episode's sampling
BELIEF_SEED_KEY = 0xBE11EF  # the belief's posterior draws, apart from the episode's and the lookahead's
POLICY_SEED_KEY = 0x9017C7  # a scripted policy's generator, apart from the environment's
RENAME_SEED_KEY = 0x4E4D  # the starting policy's renamed episodes, apart from the environment's seed
BUDGET_SEED_KEY = 0xB0D6  # a build's drawn budgets (`budget_spread`), apart from the renaming
BRANCH_SEED_KEY = 0xB7A4C  # step credit's continuations, apart from the held-out episodes' token streams
CORPUS_SEED_OFFSET = 10_000_000  # the tiny causal model's corpus SCMs, far from the bundled splits'


def seed_word(*words: int) -> int:
    """`SeedSequence(words)` as one 32-bit seed."""
    return int(np.random.SeedSequence([int(w) for w in words]).generate_state(1)[0])


def generator(*words: int) -> np.random.Generator:
    """The generator of `SeedSequence(words)`."""
    return np.random.default_rng([int(w) for w in words])


def row_seed(split: str, i: int) -> int:
    """The seed of row `i` of `split` ("train" or "heldout")."""
    if split not in SPLITS:
        raise ValueError(f"row_seed: split must be one of {SPLITS}, got {split!r}")
    return (HELDOUT_SEED_OFFSET if split == "heldout" else 0) + int(i)


def environment_seed(row: dict, k: int | None = None) -> int:
    """The environment seed of episode `k` of `row`: the row seed itself for k = None (the episode GRPO plays),
    `seed_word(row seed, k)` for episode k of an evaluation, so episodes differ in noise."""
    return int(row["seed"]) if k is None else seed_word(row["seed"], k)


def episode_seed(heldout_seed: int, row: int, sample: int) -> int:
    """The token stream of sampled episode `(row, sample)` under `heldout_seed`."""
    return seed_word(heldout_seed, row, sample)


def branch_seed(seed: int, step: int, k: int) -> int:
    """The token stream of the k-th continuation step credit samples in training step `step` of a run seeded `seed`
    (training/features/step_branches.py), apart from the held-out episodes' streams."""
    return seed_word(seed, step, k, BRANCH_SEED_KEY)


def stream_seed(episode_seed: int, turn: int) -> int:
    """The seed of an episode's token stream in its `turn`-th generation call."""
    return seed_word(episode_seed, turn)


def corpus_scm_seed(k: int) -> int:
    """The SCM seed of the tiny causal model's corpus episode k (training/tasks/causal/tiny_model.py)."""
    return CORPUS_SEED_OFFSET + int(k)


def data_set_seed(unit: int, k: int) -> int:
    """The seed of the k-th data set of unit `unit` (an SCM's index, or a row's seed) in the surrogate comparison
    (training/tasks/causal/surrogates/compare_surrogates.py)."""
    return 1000 * int(unit) + int(k)


def benchmark_scm_seed(repeat: int, e: int) -> int:
    """The seed of the e-th seeded SCM of repeat `repeat` of the surrogate speed benchmark."""
    return 100 * int(repeat) + int(e)


def styles_seed(split_seed: int) -> int:
    """The seed of the bundled larger-number split's prompt styles, apart from its numbers' (`split_seed`)."""
    return int(split_seed) + 1


def drawn_seed(rng: np.random.Generator) -> int:
    """A seed drawn from `rng`, for a generator of its own (the rollout reference's simulated worlds)."""
    return int(rng.integers(2**63))
