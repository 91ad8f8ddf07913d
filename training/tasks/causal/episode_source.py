"""Which episodes a causal command plays or makes, as one value (`EpisodeSource`), built by one argument group that
every causal command and `python -m training.evaluate` share (`add_episode_flags`, `episode_source`) and handed from
command to command in process.

The rows: the bundled splits (`--split train` / `heldout`), a JSON-lines file of rows (`--split FILE`), or rows made
from SCM files (`--scm FILE...`, YAML: `training.tasks.causal.scm.user_scm`; `--split` of a `.yaml` file is the
same) or from a user's generator of SCMs (`--generator module:function`, called with each row's seed). Row i of a
split plays SCM i mod (number of SCMs) with the row seed `row_seed(split, i)` (the seed rule:
`training.evaluation.pairing_seeds`); an SCM file played by an evaluation command gives one held-out row per file,
episode k of it the k-th paired episode. Budget, initial samples and the in-degree bound, where given, replace every
row's (new rows: `row_schema.DEFAULT_BUDGET` and `DEFAULT_INITIAL_SAMPLES`).

The surrogate the episodes are played with (`surrogate_for`): `--surrogate` where given; else the run's or recipe's
`environment_settings` where they name one; else the one that fits the rows' SCMs (`catalogue.fitting_surrogate`,
the rule `train_scm` picks by for its file), when every row's SCM has the same; else the default, exact. So rows made
from an SCM file play, wherever they are read, with the surrogate `train_scm` and `scm_rows` chose for the file; a
surrogate asked for that does not fit the rows' mechanisms is played as asked, with a warning naming it and the one
that fits.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from training.errors import BadInputError
from training.evaluation.pairing_seeds import row_seed
from training.run_setup.command_flags import add_fields, from_flags
from training.tasks.causal.row_schema import DEFAULT_BUDGET, DEFAULT_INITIAL_SAMPLES
from training.tasks.causal.scm.scm import SCM

CAUSAL_RECIPE = Path(__file__).resolve().parents[3] / "recipes" / "causal_cpu.yaml"  # whatever the working directory
SCM_SUFFIXES = (".yaml", ".yml")
ROW_COLUMNS = ("scm_json", "seed")  # what an episode needs; the prompt only an LM policy reads
BUNDLED = ("train", "heldout")
DEFAULT_SURROGATE = "exact"


@dataclass(frozen=True)
class EpisodeSource:
    """Which episodes: their rows (a split, or SCM files and row counts), the episode settings that replace the
    rows' own, and the surrogate. Each field is the flag of the same name (None: not given)."""

    split: str | None = field(default=None, metadata={
        "help": "train, heldout, a JSONL file of causal rows, or an SCM file (.yaml): its episodes instead of the "
        "recipe's held-out rows"})
    scm: tuple[str, ...] | None = field(default=None, metadata={
        "nargs": "+", "help": "SCM file(s) (YAML, training.tasks.causal.scm.user_scm): row i plays SCM i mod their "
        "number; played by an evaluation, one held-out row per file, episode k of it the k-th paired episode"})
    heldout_scm: tuple[str, ...] | None = field(default=None, metadata={
        "nargs": "+", "help": "held-out SCM file(s) (default: --scm's)"})
    generator: str | None = field(default=None, metadata={
        "help": "module:function, function(seed) -> training.tasks.causal.scm.scm.SCM, called with each row's seed"})
    train_rows: int | None = field(default=None, metadata={"type": int, "help": "train rows (episodes of the SCMs)"})
    heldout_rows: int | None = field(default=None, metadata={
        "type": int, "help": "held-out rows (episodes of the SCMs: the units of an end-of-run comparison)"})
    budget: int | None = field(default=None, metadata={
        "type": int, "help": f"calls per episode (default: the rows' own; new rows {DEFAULT_BUDGET})"})
    initial_samples: int | None = field(default=None, metadata={
        "type": int, "help": f"observational rows at reset (default: the rows' own; new rows "
        f"{DEFAULT_INITIAL_SAMPLES})"})
    max_parents: int | None = field(default=None, metadata={
        "type": int, "help": "the in-degree bound of the exact and additive surrogates, in every row (default: none "
        "up to 10 variables, 7 for additive; 3 above)"})
    surrogate: str | None = field(default=None, metadata={
        "help": "the environment's surrogate (default: the run's or recipe's, else the one that fits the rows' "
        "SCMs: exact for affine mechanisms, additive otherwise, learned above 12 or 16 variables)"})
    frozen: bool | None = field(default=None, metadata={
        "action": "store_true", "help": "freeze the surrogate after the initial samples: no call updates the "
        "posterior"})

    def given(self) -> list[str]:
        """The fields set (flags given)."""
        return [name for name, value in vars(self).items() if value is not None]


def add_episode_flags(group, names: tuple[str, ...], defaults: dict | None = None) -> None:
    """The flags of `names` (fields of `EpisodeSource`), `--surrogate` choosing among the surrogates with draws."""
    from training.tasks.causal.surrogates.catalogue import sampled_surrogates

    add_fields(group, EpisodeSource, [n for n in names if n != "surrogate"], defaults)
    if "surrogate" in names:
        help_text = EpisodeSource.__dataclass_fields__["surrogate"].metadata["help"]
        group.add_argument("--surrogate", default=None, choices=sampled_surrogates(), help=help_text)


def episode_source(namespace, defaults: dict | None = None) -> EpisodeSource:
    """The `EpisodeSource` of parsed flags (`defaults` for those not given)."""
    return from_flags(namespace, EpisodeSource, defaults)


# ---- SCM files --------------------------------------------------------------------------------------------------------
def load_scm_file(path: str | Path) -> SCM:
    """The SCM of a user's file, the path read from the working directory."""
    from training.tasks.causal.scm.user_scm import load_user_scm

    return load_user_scm(Path(path).expanduser().resolve())


def scm_files(paths, flag: str = "--scm") -> list[SCM]:
    """The SCMs of files, or `BadInputError` naming the flag and the file."""
    from training.tasks.causal.scm.user_scm import UserSCMError

    try:
        return [load_scm_file(p) for p in paths]
    except UserSCMError as err:
        raise BadInputError(f"{flag}: {err}") from None


def scm_generator(spec: str):
    """The callable of `module:function` (a user's SCM family: function(seed) -> SCM)."""
    module, sep, name = spec.partition(":")
    if not sep or not module or not name:
        raise BadInputError(f"--generator: expected module:function, got {spec!r}")
    from training.run_setup.input_checks import (
        import_object,  # heavy (PEFT, transformers): only when a generator is named
    )

    return import_object(f"{module}.{name}", "--generator")


def generated_scms(spec: str, split: str, n: int) -> list[SCM]:
    """The generator's SCMs of rows 0..n-1 of `split`, each called with its row's seed."""
    fn = scm_generator(spec)
    scms = []
    for i in range(n):
        scm = fn(row_seed(split, i))
        if not isinstance(scm, SCM):
            raise BadInputError(f"--generator: {spec}({row_seed(split, i)}) returned a {type(scm).__name__}, not a "
                                "training.tasks.causal.scm.scm.SCM")
        scms.append(scm)
    return scms


# ---- rows -------------------------------------------------------------------------------------------------------------
def check_counts(budget: int | None, initial_samples: int | None) -> tuple[int, int]:
    """The budget and initial samples of a command (`None`: the defaults), refused unless budget >= 1, initial >= 0."""
    budget = DEFAULT_BUDGET if budget is None else budget
    initial = DEFAULT_INITIAL_SAMPLES if initial_samples is None else initial_samples
    if budget < 1:
        raise BadInputError(f"--budget: must be >= 1, got {budget}")
    if initial < 0:
        raise BadInputError(f"--initial_samples: must be >= 0, got {initial}")
    return budget, initial


def scm_file_rows(scms: list[SCM], split: str, n: int, budget: int, initial_samples: int, **settings) -> list[dict]:
    """n rows of `split` cycling through `scms` (`splits.make_rows`: `teacher`, `surrogate`, `max_parents`)."""
    from training.tasks.causal.splits import cycling, make_rows  # the teacher's import is heavy

    return make_rows(split, n, cycling(scms), budget=budget, initial_samples=initial_samples, **settings)


def split_rows(source: EpisodeSource) -> tuple[list[dict], str]:
    """(rows, description) of the source's `split` / `scm` (the bundled held-out split when neither is given), with
    its budget and initial samples, where given, replacing every row's. SCM files give one held-out row each."""
    from training.run_setup.prompt_datasets import load_rows
    from training.tasks.causal.splits import DATA_DIR

    split, scm = source.split, source.scm
    if scm is not None and split is not None:
        raise BadInputError("--scm and --split: give one of them")
    if scm is None and split is not None and Path(split).suffix in SCM_SUFFIXES:
        scm, split = (split,), None
    if scm is not None:
        b, i = check_counts(source.budget, source.initial_samples)
        rows = scm_file_rows(scm_files(scm), "heldout", len(scm), b, i)
        return rows, ", ".join(str(Path(p).expanduser().resolve()) for p in scm)
    split = split or "heldout"
    path = DATA_DIR / f"{split}.jsonl" if split in BUNDLED else Path(split).expanduser().resolve()
    rows = load_rows(path, required=ROW_COLUMNS)
    if source.budget is not None or source.initial_samples is not None:
        b, i = check_counts(source.budget, source.initial_samples)
        rows = [{**r, **({"budget": b} if source.budget is not None else {}),
                 **({"initial_samples": i} if source.initial_samples is not None else {})} for r in rows]
    return rows, str(path)


def rows_to_play(source: EpisodeSource, max_rows: int | None = None) -> tuple[list[dict], str]:
    """(rows, description) an evaluation plays: the split's or SCM files' (`split_rows`), the first `max_rows`, with
    `max_parents` where given."""
    rows, where = split_rows(source)
    rows = rows[:max_rows]
    if source.max_parents is not None:
        rows = [{**r, "max_parents": source.max_parents} for r in rows]
    return rows, where


# ---- the surrogate ----------------------------------------------------------------------------------------------------
def _scms(rows: list[dict]) -> list[SCM]:
    from training.tasks.causal.row_schema import scm_from_json

    return [scm_from_json(text) for text in dict.fromkeys(r["scm_json"] for r in rows)]


def scms_surrogate(scms: list[SCM]) -> str | None:
    """The surrogate that fits every SCM (`catalogue.fitting_surrogate`), or None when they differ in it (the bundled
    splits mix linear and nonlinear SCMs, played with the exact surrogate)."""
    from training.tasks.causal.surrogates.catalogue import fitting_surrogate

    fits = {fitting_surrogate(scm) for scm in scms}
    return fits.pop() if len(fits) == 1 else None


def rows_surrogate(rows: list[dict]) -> str | None:
    """`scms_surrogate` of the rows' SCMs."""
    return scms_surrogate(_scms(rows))


def surrogate_for(rows: list[dict], asked: str | None, where: str) -> str:
    """The surrogate `rows` are played with (module docstring): `asked` (the flag's, or the run's or recipe's
    setting) where given, checked to fit the rows' sizes and in-degree bounds; else the one that fits them. The exact
    surrogate asked for on rows with mechanisms that are not affine is played, with a warning naming the one that
    fits."""
    kind = asked or rows_surrogate(rows) or DEFAULT_SURROGATE
    check_rows_fit(rows, kind, where)
    if asked == "exact":
        from training.tasks.causal.surrogates.catalogue import fitting_surrogate, is_affine

        nonlinear = [scm for scm in _scms(rows) if not is_affine(scm)]
        if nonlinear:
            _warn_once(f"warning: {where}: the exact surrogate, as asked, on {len(nonlinear)} SCM(s) whose mechanisms "
                       f"are not affine (the {fitting_surrogate(nonlinear[0])} surrogate fits them: --surrogate "
                       f"{fitting_surrogate(nonlinear[0])})")
    return kind


_WARNED: set[str] = set()


def _warn_once(message: str) -> None:
    """`message` on stderr, once a process (a command evaluating several baselines picks the surrogate for each)."""
    if message not in _WARNED:
        _WARNED.add(message)
        print(message, file=sys.stderr)


def check_rows_fit(rows: list[dict], surrogate: str, where: str) -> None:
    """Every row fits the surrogate's size and in-degree bound (`catalogue.check_surrogate_fits`), or `BadInputError`
    naming the first that does not."""
    from training.tasks.causal.row_schema import EpisodeError
    from training.tasks.causal.surrogates.catalogue import check_surrogate_fits

    for i, r in enumerate(rows):
        try:
            check_surrogate_fits(surrogate, int(r["n_vars"]), r.get("max_parents"))
        except EpisodeError as err:
            raise BadInputError(f"{where}: row {i}: {err}") from None


def check_scms_fit(scms: list[SCM], surrogate: str, max_parents: int | None) -> None:
    """Every SCM fits the surrogate (`catalogue.check_surrogate_fits`), or `BadInputError` naming the first that does
    not."""
    from training.tasks.causal.row_schema import EpisodeError
    from training.tasks.causal.surrogates.catalogue import check_surrogate_fits

    for scm in scms:
        try:
            check_surrogate_fits(surrogate, scm.d, max_parents)
        except EpisodeError as err:
            raise BadInputError(f"--surrogate {surrogate}: SCM {scm.meta.get('name', scm.target)!r}: {err}") from None
