"""Informer stores and the cached read view reconcile uses (controller-runtime's cache-backed client).

Every reconcile used to GET the TrainJob, its runtime, the snapshot and each possible child, several
times per TrainJob as its children's events came back. Upstream reads all of these from its informers'
caches; so does trainyard now: the informers the manager runs anyway keep a `Store`, and
`CachedReads.get` (and `list`, for ResourceQuotas) answers from it once that informer has listed; kinds
the controller may not watch still go to the API server.

Stores hold only what reconcile can ask for: ConfigMaps and Secrets are watched cluster-wide (there is
no label to select the controller's own: their shape must stay upstream's), but only those a TrainJob
controls are kept, so memory follows the number of TrainJobs, not the cluster's ConfigMaps.
A store holds each object as compact JSON (orjson bytes, about a sixth of the same object as Python dicts)
and decodes a fresh copy on every read: callers mutate what they read, so a copy was made anyway, and
decoding is faster than copying dicts.
Writes go through to the API server and their responses are put in the store (read-your-writes), so
the next reconcile does not rebuild an immutable Secret it has just created before its watch event lands.
An apply that would change nothing (same configuration over an object untouched since) is not sent at
all (`apply_record.py`): that is most of the reconciles a TrainJob's children's events trigger.
"""

from __future__ import annotations

import threading
from typing import Callable

import orjson

from trainyard.k8s import resource_version

from .apiserver import FIELD_MANAGER, ApiServer, ApiView, Resource, resource_for
from .apply_record import AppliedAs, digest, still_as_applied

Key = tuple[str, str]


def object_key(obj: dict) -> Key:
    meta = obj.get("metadata") or {}
    return meta.get("namespace") or "", meta.get("name") or ""


def stripped(obj: dict) -> dict:
    """`obj` without metadata.managedFields, which no reconcile reads (controller-runtime's cache transform
    `TransformStripManagedFields`): often the largest part of a child's metadata, held and copied for nothing."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


def _older(obj: dict, stored: dict | None) -> bool:
    """Whether `obj` is an older version than `stored` (resourceVersions compared as the integers the API
    server's etcd storage issues; anything else is never called older)."""
    new, old = resource_version(obj), resource_version(stored)
    return bool(new and old and new.isdigit() and old.isdigit() and int(new) < int(old))


def _packed(obj: dict) -> bytes:
    """Compact JSON of exactly its length: orjson hands back its write buffer (4 KiB and up per object, 16 KiB
    for a snapshot ConfigMap), which held five times the JSON itself in memory."""
    return bytes(memoryview(orjson.dumps(stripped(obj))))


class Store:
    """The objects of one kind as last seen, by (namespace, name); `keep` decides which are worth holding."""

    def __init__(self, resource: Resource, keep: Callable[[dict], bool] = lambda obj: True):
        self.resource, self.keep = resource, keep
        self.objects: dict[Key, bytes] = {}  # compact JSON; `get` decodes
        self.applied: dict[Key, AppliedAs] = {}  # what this controller last applied to each object
        self.synced = threading.Event()
        self.lock = threading.Lock()

    def replace(self, objects: list[dict]) -> None:
        """A (re)list: exactly these exist now, whatever was stored before."""
        with self.lock:
            self.objects = {object_key(obj): _packed(obj) for obj in objects if self.keep(obj)}
            self.applied = {key: record for key, record in self.applied.items() if key in self.objects}
        self.synced.set()

    def keys(self) -> list[Key]:
        """Every stored (namespace, name), nothing decoded."""
        with self.lock:
            return list(self.objects)

    def snapshot(self) -> dict[Key, dict]:
        """Every stored object by key, decoded (a relist compares them; plain lists read them)."""
        with self.lock:
            packed = dict(self.objects)
        return {key: orjson.loads(data) for key, data in packed.items()}

    def put(self, obj: dict, only_if_newer: bool = False) -> None:
        """Store `obj`. `only_if_newer` (a write's answer, read-your-writes): not over a version the watch has
        already delivered. The answer to an apply can arrive after the watch event of a later change (the JobSet
        controller's status update); storing it then would hide that change from every later reconcile."""
        key = object_key(obj)
        data = _packed(obj) if self.keep(obj) else None
        with self.lock:
            if only_if_newer and key in self.objects and _older(obj, orjson.loads(self.objects[key])):
                return
            if data is not None:
                self.objects[key] = data
            else:
                self.objects.pop(key, None)

    def remove(self, obj: dict) -> None:
        with self.lock:
            self.objects.pop(object_key(obj), None)
            self.applied.pop(object_key(obj), None)

    def unchanged_by(self, desired: dict, desired_digest: str) -> dict | None:
        """The stored object if applying `desired` over it would change nothing (`apply_record`), else None."""
        key = object_key(desired)
        with self.lock:
            packed, record = self.objects.get(key), self.applied.get(key)
        if packed is None or record is None:
            return None
        live = orjson.loads(packed)
        return live if still_as_applied(desired, desired_digest, live, record) else None

    def record_apply(self, desired_digest: str, answer: dict) -> None:
        with self.lock:
            self.applied[object_key(answer)] = AppliedAs.of(desired_digest, answer)

    def get(self, name: str, namespace: str | None) -> dict | None:
        """A fresh copy (callers mutate what they read), or None."""
        with self.lock:
            found = self.objects.get((namespace or "", name))
        return orjson.loads(found) if found is not None else None

    def __len__(self) -> int:
        return len(self.objects)


class CachedReads:
    """`ApiServer`'s interface with `get` served from synced stores; everything else goes to `api`."""

    def __init__(self, api: ApiServer, stores: dict[Resource, Store], fresh_on_miss: bool = False):
        self.api, self.stores = api, stores
        # Admission: an object the store lacks may have been created a moment ago (a runtime, then at once
        # a TrainJob naming it); confirm a miss with the API server instead of refusing on a lagging cache.
        self.fresh_on_miss = fresh_on_miss

    def __getattr__(self, name: str):
        return getattr(self.api, name)

    def guarded(self, may_write) -> "CachedReads":
        return CachedReads(self.api.guarded(may_write), self.stores, self.fresh_on_miss)

    def for_admission(self) -> "CachedReads":
        return CachedReads(self.api, self.stores, fresh_on_miss=True)

    def _store(self, resource: Resource) -> Store | None:
        store = self.stores.get(resource)
        return store if store is not None and store.synced.is_set() else None

    def get(self, resource: Resource, name: str, namespace: str | None = None) -> dict | None:
        store = self._store(resource)
        if store is None:
            return self.api.get(resource, name, namespace)
        obj = store.get(name, namespace)
        if obj is None and self.fresh_on_miss:
            return self.api.get(resource, name, namespace)
        if obj is not None:
            obj.setdefault("apiVersion", resource.api_version)
            obj.setdefault("kind", resource.kind)
        return obj

    def list(self, resource: Resource, namespace: str | None = None, label_selector: str | None = None,
             field_selector: str | None = None) -> dict:
        """A plain list (no selector) from a synced store; anything else from the API server."""
        store = self._store(resource)
        if store is None or label_selector or field_selector:
            return self.api.list(resource, namespace, label_selector, field_selector)
        return {"items": [obj for (ns, _), obj in sorted(store.snapshot().items())
                          if namespace is None or ns == namespace]}

    def _remember(self, resource: Resource, written) -> None:
        """The API server's answer to a write is the newest version: store it (read-your-writes)."""
        store = self.stores.get(resource)
        if store is not None and isinstance(written, dict):
            written.setdefault("apiVersion", resource.api_version)
            written.setdefault("kind", resource.kind)
            store.put(written, only_if_newer=True)

    def apply(self, obj: dict, field_manager: str = FIELD_MANAGER, basis: str | None = None) -> dict:
        """Server-side apply, unless the same configuration, built from the same `basis`, was applied over the
        stored object and nothing changed it since (`apply_record`): then the stored object is the answer, and
        no request is sent. Without a basis (or with another field manager) the apply is always sent."""
        resource = resource_for(obj)
        store = self._store(resource) if basis is not None and field_manager == FIELD_MANAGER else None
        desired_digest = digest(obj, basis) if store is not None and basis is not None else None
        if store is not None and desired_digest is not None:
            unchanged = store.unchanged_by(obj, desired_digest)
            if unchanged is not None:
                return unchanged  # decoded for this call: the caller's own
        applied = self.api.apply(obj, field_manager)
        self._remember(resource, applied)
        if store is not None and desired_digest is not None and isinstance(applied, dict):
            store.record_apply(desired_digest, applied)
        return applied

    def patch_status(self, resource: Resource, name: str, namespace: str, status: dict) -> dict:
        patched = self.api.patch_status(resource, name, namespace, status)
        self._remember(resource, patched)
        return patched

    def delete(self, resource: Resource, name: str, namespace: str | None = None,
               propagation: str = "Foreground", grace_seconds: int | None = None) -> None:
        self.api.delete(resource, name, namespace, propagation, grace_seconds)
        store = self.stores.get(resource)
        if store is not None:
            store.remove({"metadata": {"name": name, "namespace": namespace}})

    def merge_patch(self, resource: Resource, name: str, patch: dict, namespace: str | None = None) -> dict:
        patched = self.api.merge_patch(resource, name, patch, namespace)
        self._remember(resource, patched)
        return patched

    def dry_run_create(self, obj: dict) -> str | None:
        return self.api.dry_run_create(obj)

    def whoami(self) -> str:
        return self.api.whoami()

    def event(self, involved: dict, reason: str, message: str, *, name: str | None = None, **details: str) -> None:
        """`details`: ApiServer.event's type, action and component (the companion loops' Events set them)."""
        self.api.event(involved, reason, message, name=name, **details)


def as_view(reads: CachedReads) -> ApiView:
    """Type-checked: the cached reads stand in wherever the controller takes an ApiView."""
    return reads
