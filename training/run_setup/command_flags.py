"""Command-line flags from dataclass fields, and the old spellings of renamed flags.

A concern's flags are one dataclass (TRL's way: one dataclass per concern, flags spelled as the fields, with
underscores): each field is a flag `--<field>` whose argparse settings are in its metadata (`help`, and `type`,
`nargs` or `action` where the field's type does not say), default None so that a command can tell a flag given from
one left out. `add_fields` adds the fields a command takes (each defined once, whatever command declares it) and
`from_flags` reads them back into the dataclass.

`add_renamed` keeps an old spelling working for one release: it warns on stderr, naming the new flag, and sets the
new flag's value.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Iterable, Mapping

ARGPARSE_KEYS = ("type", "nargs", "action", "choices", "metavar")


def add_fields(group, dataclass_type: type, names: Iterable[str] | None = None,
               defaults: Mapping[str, object] | None = None) -> None:
    """Add a flag for each field of `dataclass_type` named in `names` (all when None); `defaults` give a command's
    own default of a field, said in its help and applied by `from_flags`."""
    fields = {f.name: f for f in dataclasses.fields(dataclass_type)}
    for name in fields if names is None else names:
        meta = fields[name].metadata
        help_text = meta["help"]
        if defaults and name in defaults:
            help_text += f" (default {defaults[name]})"
        kwargs = {k: meta[k] for k in ARGPARSE_KEYS if k in meta}
        group.add_argument(f"--{name}", default=None, help=help_text, **kwargs)


def from_flags(namespace: argparse.Namespace, dataclass_type: type, defaults: Mapping[str, object] | None = None,
               **extra):
    """The dataclass of the flags `namespace` holds (a field without a flag, or not given, takes `defaults`' value,
    else its own default); `extra` sets fields that are not flags."""
    values = {}
    for f in dataclasses.fields(dataclass_type):
        value = getattr(namespace, f.name, None)
        if value is None and defaults and f.name in defaults:
            value = defaults[f.name]
        if value is not None:
            values[f.name] = tuple(value) if isinstance(value, list) else value
    return dataclass_type(**values, **extra)


def add_renamed(group, old: str, new: str, dest: str | None = None, takes_value: bool = True, **kwargs) -> None:
    """`old`, renamed `new`: accepted with a warning naming `new` (for one release), its value stored as `new`'s."""
    group.add_argument(old, dest=dest or new.lstrip("-"), action=_Renamed, new=new,
                       nargs=kwargs.pop("nargs", None if takes_value else 0), help=argparse.SUPPRESS, **kwargs)


class _Renamed(argparse.Action):
    def __init__(self, option_strings, dest, new: str, nargs=None, **kwargs):
        self.new = new
        super().__init__(option_strings, dest, nargs=nargs, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"warning: {option_string} is renamed {self.new}; the old spelling is accepted until the next release",
              file=sys.stderr)
        setattr(namespace, self.dest, True if self.nargs == 0 else values)
