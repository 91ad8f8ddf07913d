"""The docs say how things work; the numbers live in the results ledger (docs/results/) and BENCHMARKS.md. A number the
README shows is the ledger's, line for line; reference docs tell no history of issues."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REFERENCE_DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def anchor(heading: str) -> str:
    """GitHub's anchor of a markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lstrip("#").strip().lower())
    return text.replace(" ", "-")


def section(markdown: str, fragment: str) -> str:
    """The text of the heading whose anchor is `fragment`, up to the next heading of its level or above."""
    lines = markdown.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("#") and anchor(line) == fragment]
    assert starts, f"no heading with the anchor #{fragment}"
    level = len(lines[starts[0]]) - len(lines[starts[0]].lstrip("#"))
    end = next((j for j in range(starts[0] + 1, len(lines))
                if lines[j].startswith("#") and len(lines[j]) - len(lines[j].lstrip("#")) <= level), len(lines))
    return "\n".join(lines[starts[0]:end])


def cited_blocks(markdown: str) -> list[tuple[str, str, str]]:
    """(ledger file, anchor, block) of every text block that follows a link to a ledger entry in the same paragraph."""
    found = []
    for match in re.finditer(r"\((docs/results/[\w.]+)#([\w-]+)\)[^`]*?```text\n(.*?)```", markdown, re.S):
        found.append(match.groups())
    return found


def test_the_anchor_rule_and_a_section():
    assert anchor("### 1.1 The README's command from a fresh clone") == "11-the-readmes-command-from-a-fresh-clone"
    text = "# A\n## 1.1 B\nb\n### c\nc\n## 1.2 D\nd\n"
    assert section(text, "11-b") == "## 1.1 B\nb\n### c\nc"


def test_the_readmes_output_block_is_the_ledger_entry_it_cites():
    readme = (ROOT / "README.md").read_text()
    blocks = cited_blocks(readme)
    assert blocks, "the README shows what the main job prints, citing the ledger's entry"
    for ledger, fragment, block in blocks:
        entry = section((ROOT / ledger).read_text(), fragment)
        assert block.strip() in entry, f"README's block differs from {ledger}#{fragment}"


def test_reference_docs_name_no_issue():
    named = {str(p.relative_to(ROOT)): re.findall(r"\bissues? \d+|\bissue-\d+|\(issue", p.read_text())
             for p in REFERENCE_DOCS}
    assert {k: v for k, v in named.items() if v} == {}


def test_every_results_file_is_under_docs_results():
    stray = [p.name for p in (ROOT / "docs").iterdir() if p.name.startswith("results") and p.name != "results"]
    assert stray == [] and not (ROOT / "docs" / "starting_policy_builds").exists()
