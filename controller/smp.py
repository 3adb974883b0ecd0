"""Kubernetes strategic merge patch (SMP) on plain dicts.

Why our own: runtimePatches / podTemplateOverrides are applied upstream with
`strategicpatch.StrategicMergePatch`, and list ORDER after a merge is observable (env order, container
order). A naive dict merge gets it wrong. This follows apimachinery's algorithm:

* maps merge recursively; a `null` patch value deletes the key;
* a list whose field has a merge key merges items by that key (patch item merged into the original
  item), `{"$patch": "delete", key: ...}` removes an item, `{"$patch": "replace"}` replaces the list;
* any other list is replaced (atomic: command, args, tolerations, nodeSelectorTerms...);
* ordering: items named in the patch come in patch order, original-only items keep original order, and
  the two sequences are interleaved by `mergeSortedSlice` (an original-only item is emitted before the
  next patch item only when both were in the original and it came first). Patch-only items therefore
  precede original-only items: [A, B] + patch [A, C] -> [A, C, B].
"""

from __future__ import annotations

from typing import Any, Mapping

from trainyard.k8s import json_copy
from .errors import BuildError

# Merge keys of the JobSet spec / pod template types (from the Go struct tags `patchMergeKey`).
# A field name maps to its merge key wherever it appears; fields not listed are replaced atomically.
POD_MERGE_KEYS: Mapping[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "imagePullSecrets": "name",
    "schedulingGates": "name",
    "resourceClaims": "name",
    "hostAliases": "ip",
    "env": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
}
JOBSET_MERGE_KEYS: Mapping[str, str] = {**POD_MERGE_KEYS, "replicatedJobs": "name"}

_DIRECTIVE = "$patch"


def strategic_merge(original: Any, patch: Any, merge_keys: Mapping[str, str] = JOBSET_MERGE_KEYS) -> Any:
    """Return `original` patched with `patch` (neither argument is modified)."""
    if not isinstance(patch, dict):
        return json_copy(patch)
    if not isinstance(original, dict):
        original = {}
    return _merge_map(json_copy(original), json_copy(patch), merge_keys)


def _merge_map(original: dict, patch: dict, keys: Mapping[str, str]) -> dict:
    directive = patch.pop(_DIRECTIVE, None)
    if directive == "replace":
        return _strip_nulls(patch)
    if directive == "delete":
        return {}
    if directive not in (None, "merge"):
        raise BuildError(f"strategic merge patch: unknown $patch directive {directive!r}")
    for key, patch_value in patch.items():
        if key.startswith("$setElementOrder/") or key.startswith("$retainKeys") or key.startswith("$deleteFromPrimitiveList/"):
            continue
        if patch_value is None or (isinstance(patch_value, dict) and patch_value.get(_DIRECTIVE) == "delete"):
            original.pop(key, None)
            continue
        if key not in original or original[key] is None:
            original[key] = _strip_nulls(_clean_new_value(patch_value, key, keys))
            continue
        current = original[key]
        if isinstance(current, dict) and isinstance(patch_value, dict):
            original[key] = _merge_map(current, patch_value, keys)
        elif isinstance(current, list) and isinstance(patch_value, list) and key in keys:
            original[key] = _merge_list(current, patch_value, keys[key], keys, key)
        else:
            original[key] = _strip_nulls(patch_value)
    return original


def _clean_new_value(value: Any, field: str, keys: Mapping[str, str]) -> Any:
    """A value absent from the original is taken from the patch, minus delete directives."""
    if isinstance(value, dict):
        return _merge_map({}, value, keys)
    if isinstance(value, list) and field in keys:
        return _merge_list([], value, keys[field], keys, field)
    return value


def _strip_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_nulls(v) for k, v in value.items() if v is not None and k != _DIRECTIVE}
    if isinstance(value, list):
        return [_strip_nulls(v) for v in value]
    return value


def _key_of(item: Any, merge_key: str, field: str) -> Any:
    if not isinstance(item, dict) or merge_key not in item:
        raise BuildError(f"strategic merge patch: every item of {field!r} must have the merge key {merge_key!r}")
    return item[merge_key]


def _merge_list(original: list, patch: list, merge_key: str, keys: Mapping[str, str], field: str) -> list:
    if any(isinstance(p, dict) and p.get(_DIRECTIVE) == "replace" for p in patch):
        return [_strip_nulls(p) for p in patch if not (isinstance(p, dict) and _DIRECTIVE in p)]
    for item in original:
        _key_of(item, merge_key, field)
    deleted = {_key_of(p, merge_key, field) for p in patch if isinstance(p, dict) and p.get(_DIRECTIVE) == "delete"}
    original = [o for o in original if o[merge_key] not in deleted]
    patch = [p for p in patch if not (isinstance(p, dict) and p.get(_DIRECTIVE) == "delete")]
    server_order = [o[merge_key] for o in original]
    merged = list(original)
    for p in patch:
        key = _key_of(p, merge_key, field)
        for i, o in enumerate(merged):
            if o[merge_key] == key:
                merged[i] = _merge_map(o, p, keys)
                break
        else:
            merged.append(_clean_new_value(p, "", keys))
    patch_order = [p[merge_key] for p in patch]
    in_patch = [m for m in merged if m[merge_key] in patch_order]
    server_only = [m for m in merged if m[merge_key] not in patch_order]
    in_patch.sort(key=lambda m: patch_order.index(m[merge_key]))
    return _merge_sorted(server_only, in_patch, server_order, merge_key)


def _merge_sorted(left: list, right: list, server_order: list, merge_key: str) -> list:
    """apimachinery `mergeSortedSlice`: interleave original-only items (left) with patch items (right)."""

    def position(item: dict) -> int:
        return server_order.index(item[merge_key]) if item[merge_key] in server_order else -1

    out, i, j = [], 0, 0
    while i < len(left) or j < len(right):
        if j >= len(right):
            out.append(left[i]); i += 1
        elif i >= len(left):
            out.append(right[j]); j += 1
        else:
            li, ri = position(left[i]), position(right[j])
            if li >= 0 and ri >= 0 and li < ri:
                out.append(left[i]); i += 1
            else:
                out.append(right[j]); j += 1
    return out
