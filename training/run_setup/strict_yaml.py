"""YAML that refuses a key given twice in one mapping. PyYAML keeps the last of two equal keys without a word, so
a file with two different mechanisms for one variable would run on one of them."""

from __future__ import annotations

import yaml


class DuplicateKeyError(yaml.YAMLError):
    """A mapping holds the same key twice; the message names the key and both lines (1-based)."""


class _StrictLoader(yaml.SafeLoader):
    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            self.flatten_mapping(node)
            seen: dict = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                if isinstance(key, (list, dict)):
                    continue  # unhashable: PyYAML's own error follows
                if key in seen:
                    raise DuplicateKeyError(f"duplicate key {key!r} at lines {seen[key]} and "
                                            f"{key_node.start_mark.line + 1}")
                seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def safe_load_strict(text: str):
    """`yaml.safe_load`, refusing a key given twice in any mapping (`DuplicateKeyError`)."""
    return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass: safe
