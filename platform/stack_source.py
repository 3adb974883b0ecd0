"""Stack files read with line numbers, so a problem says `stacks/Pulumi.prod.yaml:42`, not only a path.

`read_stack_source` composes the YAML (nodes carry their line) alongside loading it; `locate`
maps a problem's field path (`trainyard:tenants[team-a].quota.gpu`) to the line of the deepest
part of that path present in the file (the parent's line for a missing key).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import yaml

from trainyard import yaml_input
from trainyard.platform.problems import ConfigProblem
from trainyard.platform.stack_config import NAMESPACE, stack_values
from trainyard.problems import WARNING
from trainyard.platform.stack_reader import entry_labels

_TOKEN = re.compile(r"\[([^\]]*)\]|\.?([^.\[]+)")

Lines = dict[tuple[str, ...], int]


@dataclasses.dataclass(frozen=True)
class StackSource:
    file: str
    values: dict
    lines: Lines
    problem: ConfigProblem | None = None
    """Set when the file cannot be read or parsed; `values` is then empty."""
    misspelt: tuple[ConfigProblem, ...] = ()
    """Warnings: config keys in a namespace a typo away from `trainyard:` (`misspelt_namespaces`)."""


def read_stack_source(path: Path, file: str | None = None) -> StackSource:
    """The `trainyard:` values of a stack file and the line of every key and list entry."""
    name = file or str(path)
    try:
        data = path.read_bytes()
    except OSError as err:
        return StackSource(name, {}, {}, ConfigProblem(name, "file", f"cannot read it ({err.strerror})",
                                                       "check the stack name (stacks/Pulumi.<stack>.yaml)"))
    try:
        text = yaml_input.decode(data, name)
    except yaml_input.YamlInputError as err:
        return StackSource(name, {}, {}, _file_problem(err))
    return parse_stack_source(text, name)


def _file_problem(err: yaml_input.YamlInputError) -> ConfigProblem:
    return ConfigProblem(err.source, "file", err.detail, err.fix, line=err.line)


def parse_stack_source(text: str, file: str) -> StackSource:
    try:
        nodes = yaml_input.compose_all(text, file)
    except yaml_input.YamlInputError as err:
        return StackSource(file, {}, {}, _file_problem(err))
    if len(nodes) > 1:
        return StackSource(file, {}, {}, ConfigProblem(file, "file", f"{len(nodes)} YAML documents in one stack file",
                                                       "keep one document (remove the `---` separators)"))
    node = nodes[0] if nodes else None
    document = yaml_input.construct(node) if node is not None else None
    if document is not None and not isinstance(document, dict) or (
            isinstance(document, dict) and document.get("config") is not None
            and not isinstance(document.get("config"), dict)):
        return StackSource(file, {}, {}, ConfigProblem(file, "config", "a stack file is a mapping with a `config:` mapping",
                                                       "write config: {trainyard:...: ...}", line=1))
    lines: Lines = {}
    config_node = _child(node, "config")
    if config_node is not None:
        _walk(config_node, (document or {}).get("config"), (), lines)
    return StackSource(file, stack_values(document), lines,
                       misspelt=tuple(misspelt_namespaces((document or {}).get("config"), file, lines)))


def _distance(a: str, b: str) -> int:
    """Levenshtein distance (short strings: config namespaces)."""
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i]
        for j, y in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y)))
        previous = current
    return previous[-1]


def misspelt_namespaces(config: Any, file: str, lines: Lines | None = None) -> list[ConfigProblem]:
    """Keys such as `trainyrd:scheduler`: Pulumi reads them as another provider's config, so nothing fails and the
    stack silently loses the setting. A namespace within two edits of `trainyard` (case aside) is named, as a
    warning with the rename as its fix (another provider's real namespace is never that close)."""
    out = []
    for key in config if isinstance(config, dict) else {}:
        namespace, sep, name = str(key).partition(":")
        if not sep or namespace == NAMESPACE or _distance(namespace.lower(), NAMESPACE) > 2:
            continue
        out.append(ConfigProblem(file, str(key), f"namespace {namespace!r} is not {NAMESPACE!r}: Pulumi treats it as "
                                 f"another provider's config and trainyard never reads it",
                                 f"rename the key to {NAMESPACE}:{name}", severity=WARNING,
                                 line=(lines or {}).get((str(key),))))
    return out


def _child(node: Any, key: str) -> Any:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if getattr(key_node, "value", None) == key:
                return value_node
    return None


def _walk(node: Any, value: Any, path: tuple[str, ...], lines: Lines) -> None:
    if isinstance(node, yaml.MappingNode) and isinstance(value, dict):
        for key_node, value_node in node.value:
            key = str(key_node.value)
            lines[path + (key,)] = key_node.start_mark.line + 1
            _walk(value_node, value.get(_typed_key(key, value)), path + (key,), lines)
    elif isinstance(node, yaml.SequenceNode) and isinstance(value, list):
        for label, item_node, item in zip(entry_labels(value), node.value, value):
            lines[path + (label,)] = item_node.start_mark.line + 1
            _walk(item_node, item, path + (label,), lines)


def _typed_key(key: str, value: dict) -> Any:
    """YAML may load a key as int/bool; find the loaded key that prints as `key`."""
    return key if key in value else next((k for k in value if str(k) == key), key)


def field_path(field: str) -> tuple[str, ...]:
    """`trainyard:tenants[team-a].quota.gpu` -> ('trainyard:tenants', 'team-a', 'quota', 'gpu')."""
    return tuple(bracket or name for bracket, name in _TOKEN.findall(field) if bracket or name)


def locate(problems: list[ConfigProblem], lines: Lines) -> list[ConfigProblem]:
    """Problems with the line of their field (or of its closest present parent)."""
    out = []
    for problem in problems:
        path = field_path(problem.field or "")
        line = next((lines[path[:n]] for n in range(len(path), 0, -1) if path[:n] in lines), None)
        out.append(dataclasses.replace(problem, line=line) if line and not problem.line else problem)
    return out
