"""The agent's system prompt, rendered from `prompts/*.jinja` with the tool list generated from the tools' schemas."""

from __future__ import annotations

from pathlib import Path

import jinja2
from transformers.utils import get_json_schema

from training.errors import MissingPathError
from training.tool_use.tool_names import environment_tool_names


def tool_schemas(env_cls: type) -> list[dict]:
    """JSON schemas of an environment's tools, exactly as the chat template receives them (from the docstrings)."""
    return [get_json_schema(getattr(env_cls, name)) for name in environment_tool_names(env_cls)]


def render_system_prompt(template_path: str | Path, env_cls: type) -> str:
    """Render the system prompt template with `tools` = the environment's tool schemas."""
    path = Path(template_path)
    if not path.exists():
        raise MissingPathError(f"system prompt template {str(path)!r} does not exist")
    template = jinja2.Environment(undefined=jinja2.StrictUndefined).from_string(path.read_text())
    return template.render(tools=tool_schemas(env_cls)).strip()


def with_system_prompt(rows: list[dict], system_prompt: str) -> list[dict]:
    """Copies of `rows` whose `prompt` starts with the system message (a row that already has one is refused)."""
    out = []
    for i, row in enumerate(rows):
        if row["prompt"][0]["role"] == "system":
            raise ValueError(f"row {i} already has a system message; the agent's system prompt comes from prompts/")
        out.append({**row, "prompt": [{"role": "system", "content": system_prompt}, *row["prompt"]]})
    return out
