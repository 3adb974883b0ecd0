"""Normalise user documents the way the API server would before the controller sees them.

`load_trainjob` / `load_runtime` check the kind and apiVersion, reject wrongly typed fields with an
`InputError` naming the field and the fix, drop unknown fields (API server pruning) and fill CRD
defaults. CEL rules and admission checks are NOT applied here: that is `admission.py`'s job.
"""

from __future__ import annotations

from . import api
from trainyard import k8s as K
from . import constants as C
from .errors import InputError
from .schema import FieldError, apply_defaults, prune, validate

_TRAINJOB_SCHEMA = api.trainjob_schema()
_RUNTIME_SCHEMA = api.runtime_schema()


def trainjob_schema() -> dict:
    return _TRAINJOB_SCHEMA


def runtime_schema() -> dict:
    return _RUNTIME_SCHEMA


GENERATED_SUFFIX = "00000"


def _check_document(doc: object, kinds: tuple[str, ...], what: str) -> dict:
    if not isinstance(doc, dict):
        raise InputError(f"expected a {what} object (a YAML mapping), got {type(doc).__name__}", "document")
    kind = doc.get("kind")
    if kind not in kinds:
        raise InputError(f"kind is {kind!r}; expected {' or '.join(kinds)}", "kind")
    api_version = doc.get("apiVersion")
    allowed = [f"{K.TRAINER_GROUP}/{v}" for v in K.TRAINER_SERVED_VERSIONS]
    if api_version not in allowed:
        raise InputError(f"apiVersion is {api_version!r}; use {' or '.join(allowed)}", "apiVersion")
    meta = doc.get("metadata")
    if isinstance(meta, dict) and not meta.get("name") and isinstance(meta.get("generateName"), str) \
            and meta["generateName"]:
        # The API server appends five random characters; offline, a fixed stand-in keeps output reproducible.
        meta = {**meta, "name": meta["generateName"] + GENERATED_SUFFIX}
        doc = {**doc, "metadata": meta}
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta.get("name"):
        raise InputError("metadata.name is required (a non-empty string, or metadata.generateName)", "metadata.name")
    for key in ("namespace", "uid"):
        if key in meta and not isinstance(meta[key], str):
            raise InputError(f"metadata.{key} must be a string", f"metadata.{key}")
    for key in ("labels", "annotations"):
        value = meta.get(key)
        if value is not None and (not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values())):
            raise InputError(f"metadata.{key} must map strings to strings (quote numbers and booleans)", f"metadata.{key}")
    return doc


def shape_errors(schema: dict, doc: dict, old: dict | None = None) -> list[FieldError]:
    """Type / required errors only: the ones that make a document unusable (not CEL rules)."""
    errors = validate(schema, doc, "", old if old is not None else _missing())
    return [e for e in errors if e.kind == "Required" or "must be of type" in e.message]


def _missing():
    from .schema import _MISSING
    return _MISSING


def _raise_first(errors: list[FieldError]) -> None:
    if not errors:
        return
    err = errors[0]
    path = (err.field or "").lstrip(".")
    if err.kind == "Required":
        raise InputError("required field is missing; add it", path)
    expected = err.message.split("must be of type ")[-1].split(":")[0]
    raise InputError(f"must be of type {expected}, got {_kind(err.value)}; fix the value of this field", path)


def _kind(value: object) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer", float: "number",
            type(None): "null"}.get(type(value), type(value).__name__)


def normalize(doc: dict, schema: dict) -> tuple[dict, list[str]]:
    """Prune unknown fields and apply defaults; return the result and the pruned field paths."""
    pruned, unknown = prune(schema, doc)
    return apply_defaults(schema, pruned), unknown


def load_trainjob(doc: object) -> dict:
    trainjob = _check_document(doc, (C.TRAINJOB_KIND,), "TrainJob")
    if not isinstance(trainjob.get("spec"), dict):
        raise InputError("spec is required (a mapping with at least runtimeRef.name)", "spec")
    trainjob, _ = normalize(trainjob, _TRAINJOB_SCHEMA)
    if not isinstance(trainjob.get("status", {}), dict):
        trainjob["status"] = {}
    without_status = {k: v for k, v in trainjob.items() if k != "status"}  # status is ours, not the user's
    _raise_first(shape_errors(_TRAINJOB_SCHEMA, without_status))
    return trainjob


def load_runtime(doc: object) -> dict:
    runtime = _check_document(doc, C.RUNTIME_KINDS, "TrainingRuntime or ClusterTrainingRuntime")
    if not isinstance(runtime.get("spec"), dict):
        raise InputError("spec is required (a mapping with at least template.spec.replicatedJobs)", "spec")
    runtime, _ = normalize(runtime, _RUNTIME_SCHEMA)
    _raise_first(shape_errors(_RUNTIME_SCHEMA, runtime))
    return runtime
