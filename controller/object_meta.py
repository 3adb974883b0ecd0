"""Kubernetes' ObjectMeta rules for `trainyard validate` / `render` (pure).

The API server checks a custom resource's metadata (names, namespace, label keys and values, annotation
keys) and drops unknown metadata keys, so `metadata.lables` silently loses every label. These checks say so
offline, with apimachinery's limits: qualified names (an optional DNS-1123 subdomain prefix of at most 253
characters, `/`, a name of at most 63), label values of at most 63, a namespace that is a DNS-1123 label.
"""

from __future__ import annotations

import difflib
import re

from .schema import FieldError

KNOWN_KEYS = ("name", "generateName", "namespace", "labels", "annotations", "ownerReferences", "finalizers", "uid",
              "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
              "managedFields", "selfLink")
_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
NAME_PART_RULE = ("must be at most 63 characters of letters, digits, '-', '_' or '.', starting and ending with a "
                  "letter or digit")
MAX_ANNOTATIONS_BYTES = 256 * 1024


def qualified_name_problem(key: str) -> str | None:
    """Why `key` is not a valid label or annotation key (None when it is)."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix)):
        return "its prefix must be a lowercase DNS subdomain (e.g. example.com) of at most 253 characters"
    if len(name) > 63 or not _NAME_PART.match(name):
        return f"its name part {NAME_PART_RULE}"
    return None


def label_value_problem(value: object) -> str | None:
    if not isinstance(value, str):
        return "a label value must be a string (quote it)"
    if value and (len(value) > 63 or not _NAME_PART.match(value)):
        return f"a label value may be empty, else it {NAME_PART_RULE}"
    return None


def unknown_metadata_errors(doc: dict) -> list[FieldError]:
    """Metadata keys the API server would drop silently, each with the closest known key."""
    meta = doc.get("metadata")
    out = []
    for key in meta if isinstance(meta, dict) else ():
        if key not in KNOWN_KEYS:
            close = difflib.get_close_matches(str(key), KNOWN_KEYS, n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            out.append(FieldError(f"metadata.{key}", "Unknown field",
                                  f"not a metadata field{hint}; the API server would drop it silently: fix the name"))
    return out


def metadata_errors(doc: dict) -> list[FieldError]:
    """Every metadata problem the API server would refuse (unknown keys: `unknown_metadata_errors`)."""
    meta = doc.get("metadata")
    if not isinstance(meta, dict):
        return [FieldError("metadata", "Required value", "a mapping with at least a name")] if meta is not None else []
    out = []
    namespace = meta.get("namespace")
    if namespace is not None and (not isinstance(namespace, str) or len(namespace) > 63
                                  or not _DNS1123_LABEL.match(namespace)):
        out.append(FieldError("metadata.namespace", "Invalid value",
                              "a namespace is a lowercase DNS label: at most 63 of a-z, 0-9 and '-', starting and "
                              "ending with a letter or digit", namespace))
    for field in ("labels", "annotations"):
        values = meta.get(field)
        if values is None:
            continue
        if not isinstance(values, dict):
            out.append(FieldError(f"metadata.{field}", "Invalid value", "must be a mapping of key: value"))
            continue
        for key, value in values.items():
            why, shown = qualified_name_problem(str(key)), key
            if why is None and field == "labels":
                why, shown = label_value_problem(value), value
            if why:
                out.append(FieldError(f"metadata.{field}[{key}]", "Invalid value", why,
                                      shown if isinstance(shown, str) and len(shown) < 100 else "..."))
        if field == "annotations" and sum(len(str(k)) + len(str(v)) for k, v in values.items()) > MAX_ANNOTATIONS_BYTES:
            out.append(FieldError("metadata.annotations", "Too long", "annotations may total at most 256 KiB"))
    return out
