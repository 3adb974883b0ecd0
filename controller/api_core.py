"""The core/v1 pieces of the `trainer.kubeflow.org` schemas: env, resources, volume mounts, pod spec patches.

Typed where trainyard reads or CEL-checks them, unknown fields preserved otherwise (as the API server
stores what the Pod API allows).
"""

from __future__ import annotations

from trainyard.k8s import QUANTITY_PATTERN

from .schema import array, atomic_map, boolean, free_object, immutable, int_or_string, integer, list_map, list_type, obj, preserve_unknown, string, string_map

IMMUTABLE = immutable()


def env_var() -> dict:
    return obj({"name": string(), "value": string(), "valueFrom": free_object()}, required=["name"])


def env_list(max_items: int = 128) -> dict:
    return array(env_var(), maxItems=max_items, **list_map("name"))


def resource_list() -> dict:
    return {"type": "object", "additionalProperties": int_or_string(pattern=QUANTITY_PATTERN)}


def preserved_object_meta() -> dict:
    """Template metadata: labels and annotations are string maps as in ObjectMeta (the build copies them)."""
    return obj({"labels": string_map(), "annotations": string_map()}, **preserve_unknown())


def resource_requirements() -> dict:
    return obj({
        "limits": resource_list(),
        "requests": resource_list(),
        "claims": array(obj({"name": string(), "request": string()}, required=["name"]),
                        **list_map("name")),
    })


def local_object_reference() -> dict:
    return obj({"name": string(default="")}, **atomic_map())


def template_metadata() -> dict:
    return obj({"labels": string_map(), "annotations": string_map()})


def volume_mount() -> dict:
    return obj({"name": string(), "mountPath": string(), "readOnly": boolean(), "subPath": string(),
                "subPathExpr": string(), "mountPropagation": string(), "recursiveReadOnly": string()},
               required=["name", "mountPath"])


def container_patch(bounded: bool = True) -> dict:
    """ContainerPatch: the only container fields a TrainJob may change (upstream PodSpecPatch).

    `bounded` adds upstream v2.3's ContainerPatch bounds (name 1..253, volumeMounts <= 128): the
    `self == oldSelf` rules on the containers lists above need them to fit the API server's CEL cost budget.
    """
    name = string(minLength=1, maxLength=253) if bounded else string()
    return obj({
        "name": name,
        "env": env_list(),
        "volumeMounts": array(volume_mount(), maxItems=128 if bounded else None,
                              **list_map("mountPath")),
        "securityContext": free_object(),
    }, required=["name"])


def toleration() -> dict:
    return obj({"key": string(), "operator": string(), "value": string(), "effect": string(),
                "tolerationSeconds": integer("int64")})


def _named(max_items: int | None = None, rules=None, item: dict | None = None) -> dict:
    extra = list_map("name")
    if max_items:
        extra["maxItems"] = max_items
    return array(item or obj({"name": string()}, required=["name"]), rules=rules, **extra)


def pod_spec_patch(immutable_fields: bool) -> dict:
    """Pod spec fields a TrainJob may override.

    `immutable_fields` (the v2.3 runtimePatches PodSpecPatch) adds upstream's per-field CEL together with
    upstream's bounds that keep those rules inside the API server's cost budget (serviceAccountName
    maxLength 253, imagePullSecrets maxItems 64, container patches bounded). The seed-era
    podTemplateOverrides variant carries no CEL and keeps its looser shape.
    """
    imm = [IMMUTABLE] if immutable_fields else None
    volume = obj({"name": string()}, required=["name"], **preserve_unknown())
    return obj({
        "serviceAccountName": string(rules=imm, maxLength=253 if immutable_fields else None),
        "nodeSelector": string_map(),
        "affinity": free_object(),
        "tolerations": array(toleration(), maxItems=128, **list_type("atomic")),
        "volumes": _named(128, imm, volume),
        "initContainers": _named(64, imm, container_patch(immutable_fields)),
        "containers": _named(64, imm, container_patch(immutable_fields)),
        "schedulingGates": _named(16),
        "imagePullSecrets": _named(64 if immutable_fields else None, imm),
        "securityContext": free_object(rules=imm),
        "terminationGracePeriodSeconds": integer("int64", rules=imm, minimum=0),
    })
