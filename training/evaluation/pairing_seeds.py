"""The two seeds that pair episodes across policies, in one place.

* `episode_seed(heldout_seed, row, sample)`: the sampling stream of a language model's episode (row, sample) under an
  evaluation seed, so two models evaluated with the same seed draw their tokens from the same streams.
* `environment_seed(row, k)`: the environment seed of episode k of a row (from the row's own `seed`), whatever plays
  it, so every policy's episode k on a row starts from the same data and draws the same noise for the same calls.

Both are numpy `SeedSequence` hashes to one 32-bit word: nearby ids get unrelated streams, and neither depends on
batching.
"""

from __future__ import annotations

import numpy as np


def episode_seed(heldout_seed: int, row: int, sample: int) -> int:
    """The seed of episode `(row, sample)` under `heldout_seed`: `SeedSequence([heldout_seed, row, sample])`."""
    return int(np.random.SeedSequence([int(heldout_seed), int(row), int(sample)]).generate_state(1)[0])


def environment_seed(row: dict, k: int) -> int:
    """The environment seed of episode `k` on `row`: `SeedSequence([row seed, k])`, so episodes differ in noise."""
    return int(np.random.SeedSequence([int(row["seed"]), int(k)]).generate_state(1)[0])
