"""When a server-side apply would change nothing: the same configuration over an object nobody touched since.

Upstream re-applies a TrainJob's JobSet and PodGroup on every reconcile, and every child event (the
JobSet controller's status, Volcano's PodGroup phase, the snapshot ConfigMap) triggers one: about four
applies of each per TrainJob, each a write that spends the client's rate limit. trainyard remembers
what it last applied to each child and skips the request when all of these hold:
- the configuration it would send is byte-for-byte the one it sent last time, so no field it owned is
  about to be dropped, and it was built from the same edit of the TrainJob (`basis`: its generation,
  labels and annotations; not its status): an edit by the user re-applies everything, as upstream does,
  so a refusal by an admission policy added since (the queue guard) reaches the TrainJob;
- the object is the one that answer came from (same uid);
- every field of that configuration still holds the value it sent: cheaply when nothing but status
  moved on (same `metadata.generation`; kinds without one, such as ConfigMaps: same resourceVersion),
  else by comparing it with the object (Volcano rewrites whole PodGroups, bumping their generation);
  labels, annotations and ownerReferences are always compared (metadata edits bump no generation).
Anything else sends the apply, so drift is corrected as upstream corrects it. Values the server
normalises (quantities, defaults inside lists) only cost an apply. The record lives in the informer
store beside the object and goes with it; a restarted controller applies once, then skips.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import orjson


IDENTITY = ("apiVersion", "kind", "metadata")  # same object by key and uid; metadata compared on its own


@dataclass(frozen=True)
class AppliedAs:
    """What one apply sent (`digest`) and which version of the object it produced."""

    digest: str
    uid: str | None
    generation: int | None
    resource_version: str | None

    @classmethod
    def of(cls, digest: str, answer: dict) -> "AppliedAs":
        meta = answer.get("metadata") or {}
        return cls(digest, meta.get("uid"), meta.get("generation"), meta.get("resourceVersion"))


def digest(obj: dict, basis: str = "") -> str:
    """What identifies one apply: the configuration and what it was built from."""
    text = orjson.dumps(obj, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS) + b"\n" + basis.encode()
    return hashlib.sha256(text).hexdigest()


def edit_basis(trainjob: dict) -> str:
    """The user's edit of a TrainJob its children were built from: spec (generation), labels, annotations."""
    meta = trainjob.get("metadata") or {}
    return json.dumps([meta.get("uid"), meta.get("generation"), meta.get("labels") or {}, meta.get("annotations") or {}],
                      sort_keys=True)


def still_as_applied(desired: dict, desired_digest: str, live: dict | None, record: AppliedAs | None) -> bool:
    """True when applying `desired` over `live` again would change nothing (see the module docstring)."""
    if live is None or record is None or record.digest != desired_digest:
        return False
    meta = live.get("metadata") or {}
    if meta.get("uid") != record.uid or not _metadata_still_there(desired.get("metadata") or {}, meta):
        return False
    if record.generation is not None and meta.get("generation") == record.generation:
        return True
    if record.generation is None and meta.get("resourceVersion") == record.resource_version:
        return True
    return all(key in IDENTITY or _holds(live.get(key), value) for key, value in desired.items())


def _holds(live, desired) -> bool:
    """Every field of `desired` is in `live` with the same value (maps may hold more; lists must be equal)."""
    if isinstance(desired, dict):
        return isinstance(live, dict) and all(_holds(live.get(key), value) for key, value in desired.items())
    return live == desired


def _metadata_still_there(desired: dict, live: dict) -> bool:
    for field in ("labels", "annotations"):
        have = live.get(field) or {}
        if any(have.get(key) != value for key, value in (desired.get(field) or {}).items()):
            return False
    owners = live.get("ownerReferences") or []
    return all(ref in owners for ref in desired.get("ownerReferences") or [])
