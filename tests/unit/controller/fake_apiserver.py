"""An in-memory stand-in for the `ApiServer` methods `reconcile` uses, for unit tests of its logic.

It stores whole objects (apply replaces, no field ownership, no defaulting, no admission) and records every
call, which is all reconcile's decisions depend on; the real API server is exercised by tests/integration.
"""

from __future__ import annotations

import builtins
import copy
import json

from trainyard.controller.runtime.apiserver import ApiView, Resource, resource_for
from trainyard.controller.runtime.transport import ApiError


def api_error(status: int, message: str = "") -> ApiError:
    error = ApiError(status=status, reason={403: "Forbidden", 409: "Conflict", 500: "Internal Server Error"}.get(status, ""))
    error.body = json.dumps({"message": message or f"error {status}"})
    return error


def merge_patch(target: dict, patch: dict) -> dict:
    """RFC 7386 JSON merge patch (null deletes)."""
    out = dict(target)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge_patch(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


class FakeApiServer:
    """`errors[(verb, kind)]` (verb: get, list, apply, delete) makes that call raise; `calls` lists
    (verb, kind, name) in order; `events` the (reason, message) pairs posted."""

    def __init__(self, *objects: dict, errors: dict | None = None):
        self.objects: dict[tuple, dict] = {}
        self.errors = dict(errors or {})
        self.calls: list[tuple[str, str, str | None]] = []
        self.events: list[tuple[str, str]] = []
        self.version = 0
        for obj in objects:
            self.objects[self._key_of(obj)] = copy.deepcopy(obj)

    @staticmethod
    def _key(resource: Resource, name: str | None, namespace: str | None) -> tuple:
        return resource.api_version, resource.kind, namespace if resource.namespaced else None, name

    def _key_of(self, obj: dict) -> tuple:
        meta = obj["metadata"]
        return self._key(resource_for(obj), meta["name"], meta.get("namespace"))

    def _record(self, verb: str, kind: str, name: str | None) -> None:
        self.calls.append((verb, kind, name))
        if (verb, kind) in self.errors:
            raise self.errors[(verb, kind)]

    # the ApiServer methods reconcile uses ------------------------------------------------------
    def get(self, resource: Resource, name: str, namespace: str | None = None) -> dict | None:
        self._record("get", resource.kind, name)
        found = self.objects.get(self._key(resource, name, namespace))
        return copy.deepcopy(found) if found is not None else None

    def list(self, resource: Resource, namespace: str | None = None, label_selector: str | None = None,
             field_selector: str | None = None) -> dict:
        self._record("list", resource.kind, None)
        items = [copy.deepcopy(o) for (api_version, kind, ns, _), o in self.objects.items()
                 if (api_version, kind) == (resource.api_version, resource.kind) and ns == namespace]
        return {"items": items}

    def apply(self, obj: dict, field_manager: str = "trainer", basis: str | None = None) -> dict:
        self._record("apply", obj["kind"], obj["metadata"]["name"])
        key = self._key_of(obj)
        stored = {**copy.deepcopy(obj), "status": copy.deepcopy((self.objects.get(key) or {}).get("status") or {})}
        self.version += 1
        stored["metadata"]["resourceVersion"] = str(self.version)  # every apply here changes the object
        self.objects[key] = stored
        return copy.deepcopy(stored)

    def patch_status(self, resource: Resource, name: str, namespace: str, status: dict) -> dict:
        self._record("patch_status", resource.kind, name)
        key = self._key(resource, name, namespace)
        self.objects[key] = merge_patch(self.objects[key], {"status": status})
        return copy.deepcopy(self.objects[key])

    def merge_patch(self, resource: Resource, name: str, patch: dict, namespace: str | None = None) -> dict:
        self._record("merge_patch", resource.kind, name)
        key = self._key(resource, name, namespace)
        self.objects[key] = merge_patch(self.objects[key], patch)
        return copy.deepcopy(self.objects[key])

    def delete(self, resource: Resource, name: str, namespace: str | None = None, propagation: str = "Foreground",
               grace_seconds: int | None = None) -> None:
        self._record("delete", resource.kind, name)
        self.objects.pop(self._key(resource, name, namespace), None)

    def event(self, involved: dict, reason: str, message: str, *, name: str | None = None) -> None:
        self.events.append((reason, message))

    # test helpers -------------------------------------------------------------------------------
    def find(self, kind: str, name: str, namespace: str | None = "ns", api_version: str | None = None) -> dict | None:
        resource = resource_for(kind, api_version)
        return self.objects.get(self._key(resource, name, namespace))

    def verbs(self, verb: str) -> builtins.list[str]:
        return [f"{kind}/{name}" if name else kind for v, kind, name in self.calls if v == verb]


def as_view(fake: FakeApiServer) -> ApiView:
    """Type-checked (tests/unit/test_types.py): the fake stands in wherever the controller takes an ApiView."""
    return fake
