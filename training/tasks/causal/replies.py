"""What the causal environment says besides the options (`belief.Belief.line`): reset's summary of the initial data,
and a call's sampled target values."""

from __future__ import annotations

import numpy as np

from training.tasks.causal.scm.scm import SCM


def format_target(target: str, values: np.ndarray) -> str:
    """The target's sampled values, `Y=2.1` (one per row, one decimal: the model reads these; the surrogate gets the
    whole rows)."""
    return " ".join(f"{target}={x:.1f}" for x in values)


def data_summary(scm: SCM, rows: np.ndarray, budget: int) -> str:
    """Reset's text: the budget and, over the initial observational rows, the sample correlation of the target
    with every other variable (`+0.6`; 0 where a column is constant or there are fewer than 2 rows)."""
    t = scm.index[scm.target]
    parts = []
    for v in scm.variables:
        if v == scm.target:
            continue
        r = 0.0
        if len(rows) >= 2:
            a, b = rows[:, scm.index[v]], rows[:, t]
            sa, sb = a.std(), b.std()
            if sa > 0 and sb > 0:
                r = float(np.mean((a - a.mean()) * (b - b.mean())) / (sa * sb))
        parts.append(f"{v} {r:+.1f}")
    text = f" Budget: {budget} calls."
    if len(rows):
        text += f" {len(rows)} samples, correlation with {scm.target}: {', '.join(parts)}."
    return text
