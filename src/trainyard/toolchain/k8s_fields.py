"""Which fields Kubernetes knows below a Job spec (JobSpec, PodTemplateSpec, PodSpec, Container, ...), taken
from the OpenAPI v3 document of the pinned API server version, so a typo such as `schedulerNamee` in a
runtime's `replicatedJobs[].template.spec` is refused instead of being dropped by the API server.

The document ships in the pinned `k8s.io/kubernetes` Go module (`api/openapi-spec/v3/apis__batch__v1_openapi.json`,
checked by the toolchain's go.sum). `trainyard tools build kubernetes` turns it into a small index, cached
beside the binaries (`INDEX_NAME`); `field_index()` rebuilds it from the module cache when it is missing.
Nothing here is hand-written: a new Kubernetes pin brings its own fields.
"""

from __future__ import annotations

import difflib
import json
from functools import lru_cache
from pathlib import Path
from dataclasses import dataclass
from typing import Any, Iterator

OPENAPI_FILE = "api/openapi-spec/v3/apis__batch__v1_openapi.json"
INDEX_NAME = "job-fields.json"
ROOT = "io.k8s.api.batch.v1.JobSpec"
MAP, OPAQUE = "<map>", None
_REF = "#/components/schemas/"


def _ref(schema: dict) -> str | None:
    if "$ref" in schema:
        return schema["$ref"].removeprefix(_REF)
    for part in schema.get("allOf") or []:
        if "$ref" in part:
            return part["$ref"].removeprefix(_REF)
    return None


def _child(schema: dict) -> Any:
    """What a property holds: a definition name, ["[]", child] for a list, MAP for a string-keyed map, or None."""
    if (ref := _ref(schema)) is not None:
        return ref
    if schema.get("type") == "array":
        item = _child(schema.get("items") or {})
        return ["[]", item] if item is not None else None
    if "additionalProperties" in schema:
        return MAP
    return OPAQUE


def build_index(openapi: dict, root: str = ROOT) -> dict[str, dict[str, Any]]:
    """{definition: {property: child}} for every object definition reachable from `root` that lists its
    properties (opaque objects such as RawExtension, and quantities, are left out: anything goes there)."""
    schemas = openapi["components"]["schemas"]
    index: dict[str, dict[str, Any]] = {}
    todo = [root]
    while todo:
        name = todo.pop()
        if name in index or name not in schemas:
            continue
        props = schemas[name].get("properties")
        if not props or schemas[name].get("x-kubernetes-preserve-unknown-fields"):
            continue
        index[name] = {key: _child(value) for key, value in props.items()}
        for child in index[name].values():
            while isinstance(child, list):
                child = child[1]
            if isinstance(child, str) and child != MAP:
                todo.append(child)
    return index


def write_index(module_dir: Path, out: Path) -> None:
    openapi = json.loads((module_dir / OPENAPI_FILE).read_text())
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(build_index(openapi), sort_keys=True, separators=(",", ":")))


def index_path() -> Path:
    from trainyard.toolchain.versions import tool

    return tool("kubernetes").install_dir / "openapi" / INDEX_NAME


@lru_cache(maxsize=1)
def field_index() -> dict[str, dict[str, Any]] | None:
    """The index of the pinned version; built from the Go module cache when missing (None without Go)."""
    path = index_path()
    if not path.is_file():
        try:
            from trainyard.toolchain.modules import module_dir
            from trainyard.toolchain.versions import tool

            write_index(module_dir(tool("kubernetes"), "k8s.io/kubernetes"), path)
        except (OSError, ValueError, KeyError, Exception):  # noqa: BLE001 - no Go or module at hand: unchecked
            return None
    return json.loads(path.read_text())


@dataclass(frozen=True)
class JobFields:
    """The fields one Kubernetes version knows below a Job spec: what the controller's strict checks are given
    (they read no files)."""

    version: str
    index: dict[str, dict[str, Any]]

    def unknown(self, job_spec: Any, path: str) -> Iterator[tuple[str, str | None]]:
        """(path, closest known name) of every key below a Job spec that Kubernetes does not know."""
        return unknown_fields(job_spec, ROOT, self.index, path)


def pinned_job_fields() -> JobFields | None:
    """The pinned Kubernetes version's Job fields; None when the index cannot be built (no Go): unchecked."""
    index = field_index()
    if index is None:
        return None
    from trainyard.toolchain.versions import tool

    return JobFields(tool("kubernetes").version, index)


def unknown_fields(value: Any, definition: str, index: dict, path: str) -> Iterator[tuple[str, str | None]]:
    """(path, closest known name) of every key below `value` that `definition` does not know."""
    props = index.get(definition)
    if props is None or not isinstance(value, dict):
        return
    for key, sub in value.items():
        where = f"{path}.{key}"
        if key not in props:
            close = difflib.get_close_matches(str(key), list(props), n=1, cutoff=0.6)
            yield where, close[0] if close else None
            continue
        yield from _below(sub, props[key], index, where)


def _below(value: Any, child: Any, index: dict, path: str) -> Iterator[tuple[str, str | None]]:
    if isinstance(child, list) and isinstance(value, list):
        for i, item in enumerate(value):
            yield from _below(item, child[1], index, f"{path}[{i}]")
    elif isinstance(child, str) and child != MAP:
        yield from unknown_fields(value, child, index, path)
