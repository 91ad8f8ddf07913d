"""The episode readings' shared command line: --model is required unless given a default, the rest default to the
main job's held-out rows under the exact surrogate, and the report prints the summary and writes it with its extras."""

from __future__ import annotations

import argparse
import json

import pytest

from benchmarks.episode_reading_cli import add_episode_arguments, report


def parser(**kw) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    add_episode_arguments(p, rows=7, **kw)
    return p


def test_model_is_required_unless_it_has_a_default(capsys):
    with pytest.raises(SystemExit):
        parser().parse_args([])
    assert "--model" in capsys.readouterr().err
    args = parser(model="models/x").parse_args([])
    assert (args.model, args.split, args.surrogate, args.rows, args.out) == (
        "models/x", "data/causal/heldout.jsonl", "exact", 7, None)


def test_the_report_prints_the_summary_and_writes_it_with_its_extras(tmp_path, capsys):
    out = tmp_path / "r.json"
    report({"a": 1}, str(out), {"ends": [2]})
    assert json.loads(capsys.readouterr().out) == {"a": 1}
    assert json.loads(out.read_text()) == {"a": 1, "ends": [2]}
