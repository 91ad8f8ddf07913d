"""Seeded variable names, intervention ranges and goals for the bundled SCMs, so that what the policy learns to read
is not tied to one naming scheme, one range or one direction: a user's file calls its variables `PKA`, `yield` or
`blood_pressure`, bounds them to [0, 20] and may ask for a minimum.

`naming(d, rng)`: d distinct names (the target's last) in one of `STYLES`:

* ``indexed``: X1 .. X{d-1} and the target Y (the bundled task's old names);
* ``letters``: single capital letters;
* ``genes``: short protein and gene names (PKA, Raf, Erk, Tp53, ...);
* ``words``: lower-case measured quantities (dose, rain, yield, blood_pressure, ...), Python keywords among them
  (`yield`, `return`): names are the user's, and a mechanism may read them;
* ``codes``: short generated identifiers (v3, gk17, n_4, ...), which no tokenizer has seen whole;
* ``random`` (not among `STYLES`, so no split draws it): identifiers of 1 to 8 random letters, digits and
  underscores, what the causal tokenizer's merges are learned from (`training.tasks.causal.tiny_model`), so that no
  name of any style is a token of its own and the policy learns to copy names piece by piece, whatever they are.

`ranges(names, rng)`: per settable variable an interval with ends at one decimal: symmetric ([-3, 3], [-1.5, 1.5],
[-5, 5]), shifted ([0, 4], [-1, 5]) or one per variable, drawn per SCM. `goal(rng)`: "min" one time in four.
"""

from __future__ import annotations

import keyword

import numpy as np

STYLES = ("indexed", "letters", "genes", "words", "codes")
GENES = ("PKA", "PKC", "Raf", "Mek", "Erk", "Akt", "Jnk", "P38", "Plcg", "PIP2", "PIP3", "Ras", "Src", "Myc", "Tp53",
         "Egfr", "Stat3", "Nfkb", "Mtor", "Pi3k", "Gsk3", "Creb", "Jun", "Fos", "Bcl2", "Bax", "Cdk2", "Rb1", "E2f1",
         "Mdm2", "Wnt", "Notch", "Shh", "Tgfb", "Smad4", "Il6", "Tnf", "Vegf", "Hif1a", "Sox2")
WORDS = ("dose", "rain", "yield", "return", "price", "sales", "demand", "supply", "soil", "sun", "wind", "speed",
         "load", "cost", "fuel", "ad_spend", "blood_pressure", "heart_rate", "glucose", "insulin", "weight", "age",
         "income", "traffic", "light", "water", "nitrogen", "growth", "stress", "temp", "humidity", "pressure",
         "flow", "voltage", "current", "density", "output", "quality", "wage", "rate", "score", "sleep", "mood",
         "caffeine", "exercise", "protein", "fat", "sugar", "noise", "latency")
SYMMETRIC = (1.0, 1.5, 2.0, 3.0, 4.0, 5.0)
SHIFTED = ((0.0, 4.0), (-1.0, 5.0), (0.0, 10.0), (-2.0, 1.0), (-0.5, 2.5), (1.0, 6.0))


def _code(rng: np.random.Generator) -> str:
    letters = "abcdefghjkmnpqrstuvwxyz"
    head = "".join(rng.choice(list(letters), size=int(rng.integers(1, 3))))
    return f"{head}{'_' if rng.random() < 0.2 else ''}{int(rng.integers(0, 30))}"


def _random_identifier(rng: np.random.Generator) -> str:
    first = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    rest = first + "0123456789_"
    return str(rng.choice(list(first))) + "".join(rng.choice(list(rest), size=int(rng.integers(0, 8))))


def naming(d: int, rng: np.random.Generator, style: str | None = None) -> list[str]:
    """d distinct names in `style` (drawn from `STYLES` when None), the target's last."""
    style = style or STYLES[int(rng.integers(len(STYLES)))]
    if style == "random":
        pool = sorted({_random_identifier(rng) for _ in range(4 * d)} - {"e", "pi"} - set(keyword.kwlist))
        return [str(pool[i]) for i in rng.choice(len(pool), size=d, replace=False)]
    if style == "indexed":
        return [*(f"X{i + 1}" for i in range(d - 1)), "Y"]
    if style == "letters":
        pool = [c for c in "ABCDEFGHJKLMNPQRSTUVWXYZ"]
    elif style == "genes":
        pool = list(GENES)
    elif style == "words":
        pool = list(WORDS)
    elif style == "codes":
        pool = sorted({_code(rng) for _ in range(4 * d)})
    else:
        raise ValueError(f"style: must be one of {STYLES}, got {style!r}")
    if len(pool) < d:
        raise ValueError(f"naming: the {style} style has {len(pool)} names, fewer than {d}")
    return [str(pool[i]) for i in rng.choice(len(pool), size=d, replace=False)]


def ranges(names: list[str], rng: np.random.Generator) -> dict[str, tuple[float, float]]:
    """An intervention range per name (see the module docstring)."""
    kind = int(rng.integers(3))
    if kind == 0:
        m = float(rng.choice(SYMMETRIC))
        return {v: (-m, m) for v in names}
    if kind == 1:
        lo, hi = SHIFTED[int(rng.integers(len(SHIFTED)))]
        return {v: (lo, hi) for v in names}
    out = {}
    for v in names:
        if rng.random() < 0.5:
            m = float(rng.choice(SYMMETRIC))
            out[v] = (-m, m)
        else:
            out[v] = SHIFTED[int(rng.integers(len(SHIFTED)))]
    return out


def goal(rng: np.random.Generator) -> str:
    return "min" if rng.random() < 0.25 else "max"


def is_keyword(name: str) -> bool:
    return keyword.iskeyword(name) or keyword.issoftkeyword(name)
