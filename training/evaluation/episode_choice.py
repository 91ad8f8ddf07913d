"""Which of a task's held-out episodes an evaluation plays: the evaluation seed, the episodes per row and the rows (the
first N). Every evaluation command takes them as these flags (`command_flags.add_fields`); None leaves the run's or
recipe's own (`heldout_seed`, `heldout_samples_per_prompt`, `heldout_max_samples`).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class EpisodeChoice:
    heldout_seed: int | None = field(default=None, metadata={
        "type": int, "help": "the evaluation seed: episode (row r, sample k) draws its tokens from a seed of "
        "(heldout_seed, r, k) (default: the run's or recipe's heldout_seed)"})
    episodes_per_row: int | None = field(default=None, metadata={
        "type": int, "help": "episodes per row (environment seeds 0..N-1; with --greedy, greedy episodes per row, "
        "default 1; else the run's or recipe's heldout_samples_per_prompt)"})
    max_rows: int | None = field(default=None, metadata={
        "type": int, "help": "only the first N rows (default: the run's or recipe's heldout_max_samples)"})
