"""A benchmark's table in BENCHMARKS.md: the section between two copies of its marker line, replaced in place (other
benchmarks' sections are left as they are) or appended."""

from __future__ import annotations

from pathlib import Path


def write_section(path: Path | str, text: str, marker: str) -> None:
    """Replace the section between the two `marker` lines of `path` by `text` (which carries the markers), or append
    it."""
    path = Path(path)
    old = path.read_text() if path.exists() else "# Benchmarks\n"
    if marker in old:
        start = old.index(marker)
        end = old.index(marker, start + len(marker)) + len(marker)
        new = old[:start] + text + old[end:]
    else:
        new = old.rstrip("\n") + "\n\n" + text + "\n"
    path.write_text(new)


def publish(text: str, path: Path | str | None, marker: str) -> None:
    """Print a benchmark's section and, where `path` is given (`--write`), write it there."""
    print(text)
    if path:
        write_section(path, text, marker)
