"""Runtime resolution and the runtime snapshot ConfigMap (KEP-2599).

On first build the referenced runtime is copied into ConfigMap `<trainjob>-runtime-snapshot` (key
`runtime`, YAML of the whole object); every later build reads the snapshot, so editing or deleting a
runtime never changes an existing TrainJob.
"""

from __future__ import annotations

from functools import lru_cache

import yaml

from trainyard import k8s as K
from trainyard.k8s import json_copy
from trainyard.yaml_input import FAST_SAFE_LOADER

from . import constants as C
from . import k8s
from .errors import BuildError, InputError
from .inputs import load_runtime
from .snapshot_seal import check_seal, sealed


def snapshot_name(trainjob: dict) -> str:
    return k8s.name_of(trainjob) + C.SNAPSHOT_SUFFIX


def runtime_key(trainjob: dict) -> tuple[str, str]:
    ref = trainjob["spec"]["runtimeRef"]
    return ref.get("kind", C.CLUSTER_TRAINING_RUNTIME_KIND), ref.get("apiGroup", K.TRAINER_GROUP)


def check_runtime_kind(trainjob: dict) -> None:
    kind, group = runtime_key(trainjob)
    if group != K.TRAINER_GROUP or kind not in C.RUNTIME_KINDS:
        raise BuildError(f"unsupported runtime: {kind}.{group}", "spec.runtimeRef")


def find_snapshot(trainjob: dict, existing) -> dict | None:
    return k8s.find_object(existing, "ConfigMap", snapshot_name(trainjob), k8s.namespace_of(trainjob))


def runtime_from_snapshot(trainjob: dict, snapshot: dict) -> dict:
    """The runtime stored in a snapshot, after checking it belongs to this TrainJob and its runtimeRef."""
    if not k8s.is_owned_by(snapshot, trainjob):
        raise BuildError("invalid runtime snapshot: ConfigMap is not controlled by this TrainJob", "spec.runtimeRef")
    text = (snapshot.get("data") or {}).get(C.SNAPSHOT_KEY)
    try:
        runtime = json_copy(_loaded_runtime(text)) if isinstance(text, str) else load_runtime(None)
    except (yaml.YAMLError, InputError) as err:
        raise BuildError(f"invalid runtime snapshot: {err}", "spec.runtimeRef") from err
    _check_matches_ref(trainjob, runtime, "invalid runtime snapshot: ")
    return runtime


# Every TrainJob of one runtime version holds the same snapshot text and every reconcile reads it: parsing it
# each time was half the controller's CPU. Parsed (and checked) once per distinct text; callers get copies.
@lru_cache(maxsize=128)
def _parsed_document(text: str) -> object:
    return yaml.load(text, Loader=FAST_SAFE_LOADER)


@lru_cache(maxsize=128)
def _loaded_runtime(text: str) -> dict:
    return load_runtime(json_copy(_parsed_document(text)))


def _check_matches_ref(trainjob: dict, runtime: dict, prefix: str = "") -> None:
    kind, group = runtime_key(trainjob)
    name = trainjob["spec"]["runtimeRef"]["name"]
    actual_group = str(runtime.get("apiVersion", "")).rpartition("/")[0]
    if runtime.get("kind") != kind or actual_group != group or k8s.name_of(runtime) != name:
        raise BuildError(f"{prefix}runtime {runtime.get('kind')}/{k8s.name_of(runtime)} does not match runtimeRef "
                         f"{kind}/{name}", "spec.runtimeRef")
    if kind == C.TRAINING_RUNTIME_KIND and k8s.namespace_of(runtime) != k8s.namespace_of(trainjob):
        raise BuildError("TrainingRuntime specified in TrainJob is not found (a TrainingRuntime must be in the "
                         "TrainJob's namespace)", "spec.runtimeRef")


def resolve_runtime(trainjob: dict, runtime: dict | None, existing,
                    seal_key: bytes | None = None) -> tuple[dict, dict | None]:
    """(runtime to build from, snapshot ConfigMap to apply or None when one already exists). With `seal_key`
    (the controller's), an existing snapshot must carry its seal and a new one gets it (`snapshot_seal.py`)."""
    check_runtime_kind(trainjob)
    snapshot = find_snapshot(trainjob, existing)
    if snapshot is not None:
        if seal_key is not None:
            check_seal(snapshot, seal_key, trainjob)
        return runtime_from_snapshot(trainjob, snapshot), None
    if runtime is None:
        kind, _ = runtime_key(trainjob)
        raise BuildError("TrainingRuntime specified in TrainJob is not found" if kind == C.TRAINING_RUNTIME_KIND
                         else "not found ClusterTrainingRuntime specified in TrainJob", "spec.runtimeRef")
    runtime = load_runtime(runtime)
    _check_matches_ref(trainjob, runtime)
    snapshot = build_snapshot(trainjob, runtime)
    return runtime, (sealed(snapshot, seal_key, trainjob) if seal_key is not None else snapshot)


def build_snapshot(trainjob: dict, runtime: dict) -> dict:
    stored = {k: runtime[k] for k in ("apiVersion", "kind", "metadata", "spec") if k in runtime}
    stored["metadata"] = {k: v for k, v in (stored.get("metadata") or {}).items()
                          if k in ("name", "namespace", "labels", "annotations", "uid", "generation", "resourceVersion")}
    return {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": k8s.object_meta(snapshot_name(trainjob), trainjob),
        "data": {C.SNAPSHOT_KEY: yaml.dump(stored, Dumper=_FAST_DUMPER, sort_keys=True)},
    }


# libyaml's emitter writes the same text as PyYAML's own (a unit test compares them) in a fraction of the time:
# the pure-Python emitter was 60 % of a new TrainJob's build.
_FAST_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def stored_runtime_document(snapshot: dict) -> dict:
    """The runtime a snapshot holds, unchecked ({} when unreadable): enough to tell which policies it names.
    The build reads it again with every check (`runtime_from_snapshot`)."""
    text = (snapshot.get("data") or {}).get(C.SNAPSHOT_KEY)
    try:
        document = _parsed_document(text) if isinstance(text, str) else None
    except yaml.YAMLError:
        return {}
    return json_copy(document) if isinstance(document, dict) else {}
