"""The one reader for YAML a user hands trainyard (stack files, TrainJobs, runtimes, catalog files).

PyYAML's safe loader is safe from code execution, not from hostile shapes. This reader adds what the
pinned Pulumi CLI and the API server already enforce, so the offline checks agree with them and no input
hangs or exhausts memory:
- a size limit (`MAX_BYTES`);
- an alias-expansion limit: a document whose aliases would expand to more than `MAX_EXPANDED_NODES`
  nodes ("billion laughs") is refused before anything walks it (the walk is linear: composed aliases
  share their node, and expanded sizes are summed per distinct node);
- duplicate mapping keys are errors naming the key and both lines (the Go YAML decoder the Pulumi
  CLI uses refuses them too);
- bytes that are not UTF-8 are reported with the file, line and byte offset, not a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import yaml

from trainyard.errors import TrainyardError

MAX_BYTES = 4 * 1024 * 1024
MAX_EXPANDED_NODES = 100_000
_MERGE_KEY = "tag:yaml.org,2002:merge"
FAST_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader: for YAML trainyard wrote itself or took from a pinned module (not a user's input, which
goes through `load`), where the pure-Python loader was a measured cost."""


class YamlInputError(TrainyardError, ValueError):
    """A YAML input refused before it is used; the message names the file, the place and the fix."""

    def __init__(self, source: str, message: str, fix: str, line: int | None = None):
        self.source, self.line, self.detail, self.fix = source, line, message, fix
        where = f"{source}:{line}" if line else source
        super().__init__(f"{where}: {message}; {fix}")


def read_text(path: Path, source: str | None = None) -> str:
    """A file's text as UTF-8, refusing oversized files and undecodable bytes with their offset."""
    name = source or str(path)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise YamlInputError(name, f"cannot read file ({err.strerror})", "check the path") from None
    return decode(data, name)


def decode(data: bytes, source: str) -> str:
    if len(data) > MAX_BYTES:
        raise YamlInputError(source, f"the file has {len(data)} bytes, more than the limit of {MAX_BYTES}",
                             "split it or remove what does not belong in it")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise YamlInputError(source, f"byte 0x{data[err.start]:02x} at byte offset {err.start} is not UTF-8",
                             "save the file as UTF-8 (e.g. `iconv -f latin1 -t utf-8`)", line=line) from None


def load(text: str, source: str) -> Any:
    """One YAML document (None when empty), checked as the module says."""
    documents = list(load_all(text, source))
    if len(documents) > 1:
        raise YamlInputError(source, f"expected one YAML document, found {len(documents)}",
                             "remove the extra `---` documents")
    return documents[0] if documents else None


def load_all(text: str, source: str) -> Iterator[Any]:
    """Every document of a YAML stream, checked as the module says."""
    for node in compose_all(text, source):
        yield construct(node)


def construct(node: yaml.Node) -> Any:
    """The Python value of a node graph `compose_all` returned (and so checked)."""
    return yaml.SafeLoader("").construct_document(node)


def compose_all(text: str, source: str) -> list[yaml.Node]:
    """The documents' node graphs (nodes carry their line), checked before anything constructs or walks them."""
    if len(text) > MAX_BYTES:
        raise YamlInputError(source, f"the text has {len(text)} characters, more than the limit of {MAX_BYTES}",
                             "split it or remove what does not belong in it")
    loader = yaml.SafeLoader(text)
    nodes: list[yaml.Node] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:  # not after check_node(); never loop on it
                break
            check_node(node, source)
            nodes.append(node)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        raise YamlInputError(source, f"malformed YAML: {getattr(err, 'problem', None) or err}", "fix the YAML syntax",
                             line=mark.line + 1 if mark else None) from None
    finally:
        loader.dispose()
    return nodes


def check_node(root: yaml.Node, source: str) -> None:
    """Refuse duplicate keys and documents whose aliases expand beyond `MAX_EXPANDED_NODES` nodes."""
    sizes: dict[int, int] = {}
    # iterative post-order over distinct nodes; an alias is the same node object, counted once per use
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        children = _children(node)
        if children_done or not children:
            total = 1 + sum(sizes.get(id(child), 0) for child in children)
            if total > MAX_EXPANDED_NODES:
                raise YamlInputError(source, f"its aliases expand to more than {MAX_EXPANDED_NODES} YAML nodes",
                                     "write the values out instead of nesting anchors and aliases",
                                     line=node.start_mark.line + 1)
            sizes[id(node)] = total
            continue
        if isinstance(node, yaml.MappingNode):
            _refuse_duplicate_keys(node, source)
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in sizes)
        if len(stack) > MAX_EXPANDED_NODES:
            raise YamlInputError(source, f"it nests more than {MAX_EXPANDED_NODES} YAML nodes", "simplify the document",
                                 line=node.start_mark.line + 1)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _refuse_duplicate_keys(node: yaml.MappingNode, source: str) -> None:
    seen: dict[tuple[str, str], int] = {}
    for key, _ in node.value:
        if not isinstance(key, yaml.ScalarNode) or key.tag == _MERGE_KEY:
            continue
        line = key.start_mark.line + 1
        if (key.tag, key.value) in seen:
            raise YamlInputError(source, f"duplicate key `{key.value}` (first at line {seen[(key.tag, key.value)]})",
                                 "keep one of the two entries", line=line)
        seen[(key.tag, key.value)] = line
