"""Strict checks for `trainyard validate` / `render`, like `kubectl --validate=strict` (pure).

The API server silently prunes fields its schema does not know, so a typo (`numNode`,
`podGroupPolicy.volcanoo`) is lost without a word: gang scheduling vanishes, the job runs on one
node. These checks say so before anything is applied, and go where the CRD schema cannot reach:
quantities inside pod templates (the CRD keeps them as unknown fields; the API server refuses them
only when the JobSet controller creates the pods), counts of zero and deprecated catalog releases.
"""

from __future__ import annotations

import difflib
from typing import Any, Iterator, Protocol

from trainyard.k8s import CATALOG_VERSION_LABEL
from trainyard.k8s import parse_quantity

from trainyard import k8s as K
from . import constants as C
from .errors import InputError
from .inputs import runtime_schema, trainjob_schema
from .object_meta import metadata_errors, unknown_metadata_errors
from .schema import FieldError, prune
from .seed_topology import topology_warnings



class JobFields(Protocol):
    """The fields a Kubernetes version knows below a Job spec (`trainyard.toolchain.k8s_fields.pinned_job_fields()`)."""

    @property
    def version(self) -> str: ...

    def unknown(self, job_spec: Any, path: str) -> Iterator[tuple[str, str | None]]: ...


def unknown_field_errors(doc: dict, runtime: bool) -> list[FieldError]:
    """Fields the API server would prune (drop silently), each with the closest known field."""
    schema = runtime_schema() if runtime else trainjob_schema()
    _, unknown = prune(schema, {k: v for k, v in doc.items() if k != "status"})
    return [FieldError(path, "Unknown field", f"not in the {doc.get('kind')} schema{_suggestion(schema, path)}; the API "
                       "server would drop it silently: fix the name or remove it") for path in unknown]


def job_spec_unknown_fields(doc: dict, runtime: bool, job_fields: JobFields | None) -> list[FieldError]:
    """Fields below a replicated job's Job spec (pod template, containers, ...) that Kubernetes does not know,
    from the pinned API server's OpenAPI (`job_fields`, read by the caller; None: unchecked): the CRD keeps them
    opaque, the Job API drops them (a `schedulerNamee` silently loses gang scheduling)."""
    if job_fields is None:
        return []
    spec = K.mapping(doc.get("spec"))  # every level type-checked before it is walked: a list or a number is no map
    patches = spec.get("runtimePatches")
    templates = [("spec.template.spec", K.mapping(spec.get("template")).get("spec"))] if runtime else [
        (f"spec.runtimePatches[{i}].trainingRuntimeSpec.template.spec",
         K.mapping(K.mapping(K.mapping(p).get("trainingRuntimeSpec")).get("template")).get("spec"))
        for i, p in enumerate(patches if isinstance(patches, list) else [])]
    out = []
    for base, jobset in templates:
        jobs = jobset.get("replicatedJobs") if isinstance(jobset, dict) else None
        for i, job in enumerate(jobs if isinstance(jobs, list) else []):
            job_spec = K.mapping(K.mapping(job).get("template")).get("spec")
            for path, close in job_fields.unknown(job_spec, f"{base}.replicatedJobs[{i}].template.spec"):
                hint = f" (did you mean {close!r}?)" if close else ""
                out.append(FieldError(path, "Unknown field", f"not a field of Kubernetes {job_fields.version}'s Job or pod "
                                      f"spec{hint}; the API server would drop it silently: fix the name or remove it"))
    return out


def _suggestion(schema: dict, path: str) -> str:
    parent, _, name = path.rpartition(".")
    node = schema
    for part in [p for p in parent.replace("]", "").split(".") if p]:
        key = part.split("[")[0]
        node = (node.get("properties") or {}).get(key) or {}
        if "[" in part:
            node = node.get("items") or {}
    known = list((node.get("properties") or {}).keys())
    close = difflib.get_close_matches(name.split("[")[0], known, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else (f" (known: {', '.join(known)})" if known else "")


def _resource_lists(value: Any, path: str) -> Iterator[tuple[str, dict]]:
    """Every `resources.requests|limits` (and `resourcesPerNode`) map in a document, with its path."""
    if isinstance(value, dict):
        for key, sub in value.items():
            sub_path = f"{path}.{key}" if path else str(key)
            if key in ("resources", "resourcesPerNode") and isinstance(sub, dict):
                for kind in ("requests", "limits"):
                    if isinstance(sub.get(kind), dict):
                        yield f"{sub_path}.{kind}", sub[kind]
            yield from _resource_lists(sub, sub_path)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _resource_lists(item, f"{path}[{index}]")


def _extended(name: str) -> bool:
    """Extended resources (nvidia.com/gpu) come in whole units; kubernetes.io/ and hugepages- are native."""
    return "/" in name and not name.split("/")[0].endswith("kubernetes.io")


def quantity_errors(doc: dict) -> list[FieldError]:
    """Quantities as the API server validates a pod: the grammar, >= 0, whole extended resources,
    requests == limits for extended resources."""
    errors = []
    for path, resources in _resource_lists({k: v for k, v in doc.items() if k != "status"}, ""):
        for name, value in resources.items():
            where = f"{path}.{name}"  # the API server's path for a CRD field (so admission's duplicate is dropped)
            try:
                amount = parse_quantity(value, where)
            except InputError as err:
                errors.append(FieldError(where, "Invalid", err.message, value))
                continue
            if amount < 0:
                errors.append(FieldError(where, "Invalid", "must be greater than or equal to 0", value))
            elif _extended(str(name)) and amount.denominator != 1:
                errors.append(FieldError(where, "Invalid", "must be an integer (extended resources are whole units)", value))
    errors += _extended_request_errors(doc)
    return errors


def _extended_request_errors(doc: dict) -> list[FieldError]:
    out = []
    for path, requests in _resource_lists(doc, ""):
        if not path.endswith(".requests"):
            continue
        limits = _limits_beside(doc, path)
        for name, value in requests.items():
            if _extended(str(name)) and name in limits and _same(value, limits[name]) is False:
                out.append(FieldError(f"{path}.{name}", "Invalid", f"must be equal to {name} limit of {limits[name]}", value))
    return out


def _limits_beside(doc: dict, requests_path: str) -> dict:
    node: Any = doc
    for part in requests_path[: -len(".requests")].replace("]", "").split("."):
        key, _, index = part.partition("[")
        node = node.get(key) if isinstance(node, dict) else None
        if index and isinstance(node, list):
            node = node[int(index)] if int(index) < len(node) else None
    limits = node.get("limits") if isinstance(node, dict) else None
    return limits if isinstance(limits, dict) else {}


def _same(a: object, b: object) -> bool | None:
    try:
        return parse_quantity(a) == parse_quantity(b)
    except InputError:
        return None  # reported as a bad quantity already


def count_errors(doc: dict) -> list[FieldError]:
    """Node counts of zero or less: accepted by the CRD, but a job of zero nodes never trains."""
    spec = K.mapping(doc.get("spec"))
    paths = (("spec.trainer.numNodes", K.mapping(spec.get("trainer"))),
             ("spec.mlPolicy.numNodes", K.mapping(spec.get("mlPolicy"))))
    return [FieldError(path, "Invalid", "must be at least 1 (a training job needs a node); remove it to use the runtime's",
                       holder["numNodes"])
            for path, holder in paths
            if isinstance(holder.get("numNodes"), int) and not isinstance(holder["numNodes"], bool)
            and holder["numNodes"] < 1]


def catalog_warnings(runtime: dict, catalog: Any) -> list[str]:
    """A (Cluster)TrainingRuntime rendered from a deprecated or retired catalog release: name the release to move to."""
    meta = K.mapping(runtime.get("metadata"))
    labels = K.mapping(meta.get("labels"))
    version = labels.get(CATALOG_VERSION_LABEL)
    kind, name = runtime.get("kind"), meta.get("name")
    if catalog is None or not version:
        if kind == C.TRAINING_RUNTIME_KIND and labels.get(K.LABEL_SUPPORT) == K.SUPPORT_DEPRECATED:
            return [f'TrainingRuntime "{name}" is deprecated; move to a supported runtime (trainyard catalog list)']
        return []
    release = next((r for r in catalog.releases if r.version == version), None)
    current = catalog.current.version
    if release is None:
        return [f'{kind} "{name}" comes from catalog release {version}, which the catalog does not know; '
                f"move to release {current}"]
    if release.status in ("deprecated", "retired") or name in release.deprecated_runtimes:
        what = f"release {version} is {release.status}" if release.status in ("deprecated", "retired") else \
            f"runtime {name} is deprecated in release {version}"
        return [f'{kind} "{name}" comes from catalog release {version} and {what}; move the tenant to release '
                f"{current} (its catalogVersion in the stack) before it is retired"]
    return []


def strict_problems(trainjob: dict, runtime: dict, catalog: Any = None,
                    job_fields: JobFields | None = None) -> dict[str, list]:
    """{"unknown": pruned fields, "errors": other refusals, "warnings": texts}; `--lenient` demotes "unknown".
    `job_fields`: the Kubernetes Job fields that pod templates are checked against (None: not checked)."""
    return {
        "unknown": unknown_field_errors(trainjob, runtime=False) + unknown_field_errors(runtime, runtime=True)
        + job_spec_unknown_fields(trainjob, False, job_fields) + job_spec_unknown_fields(runtime, True, job_fields)
        + unknown_metadata_errors(trainjob) + unknown_metadata_errors(runtime),
        "errors": metadata_errors(trainjob) + metadata_errors(runtime) + quantity_errors(trainjob) + quantity_errors(runtime)
        + count_errors(trainjob) + count_errors(runtime),
        "warnings": catalog_warnings(runtime, catalog) + topology_warnings(runtime),
    }
