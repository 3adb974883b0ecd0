"""Informers: list, then watch, keeping a store and telling a handler what changed (client-go's reflector)."""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from trainyard.k8s import resource_version

from .apiserver import ApiServer, Resource
from .cache import Store, object_key
from .transport import ApiError

log = logging.getLogger("trainyard.controller")


# The event a (re)list reports for an object nothing says has changed: on the first list, everything; on a
# relist, what kept its resourceVersion. Handlers queue these at LOW_PRIORITY, as controller-runtime does.
LISTED = "LISTED"


def list_events(before: dict | None, items: list[dict]) -> list[tuple[str, dict]]:
    """What a list means to the handlers, given the store before it (None: the first list).

    Like client-go's reflector replacing its store: a relist after a watch gap reports objects created
    meanwhile as ADDED, changed ones as MODIFIED, vanished ones as DELETED; the rest (and everything on the
    first list) as LISTED, so keys nobody changed do not crowd out fresh work."""
    if before is None:
        return [(LISTED, item) for item in items]
    events, seen = [], set()
    for item in items:
        key = object_key(item)
        seen.add(key)
        previous = before.get(key)
        if previous is None:
            events.append(("ADDED", item))
        elif resource_version(previous) == resource_version(item):
            events.append((LISTED, item))
        else:
            events.append(("MODIFIED", item))
    events += [("DELETED", obj) for key, obj in before.items() if key not in seen]
    return events



class Informer:
    """List, then watch from the last seen resourceVersion, calling `on_event(type, obj)` (client-go's reflector).

    A watch that ends or drops is resumed from the last version (bookmarks included), so an API-server
    restart costs one watch request, not a relist. Only a watch ERROR (410 Gone: that version was
    compacted away, nothing after it can be replayed) or the periodic resync relists; a relist reports
    every object as ADDED, so nothing changed during the gap is lost.
    """

    def __init__(self, api: ApiServer, resource: Resource, on_event: Callable[[str, dict], None],
                 resync_seconds: int, on_relist: Callable[[str, str], None] = lambda resource, cause: None,
                 clock: Callable[[], float] = time.monotonic, store: Store | None = None):
        self.api, self.resource, self.on_event = api, resource, on_event
        self.resync_seconds = resync_seconds
        self.on_relist = on_relist
        self.clock = clock
        self.store = store if store is not None else Store(resource)
        self.synced = self.store.synced
        self.forbidden = False

    def _typed(self, obj: dict) -> dict:
        obj.setdefault("kind", self.resource.kind)
        obj.setdefault("apiVersion", self.resource.api_version)
        return obj

    def _emit(self, event_type: str, obj: dict) -> None:
        """Store first, then notify: a reconcile the event triggers reads at least this version."""
        if event_type == "DELETED":
            self.store.remove(obj)
        else:
            self.store.put(obj)
        self.on_event(event_type, obj)

    def _list(self) -> str | None:
        listing = self.api.list(self.resource)
        items = [self._typed(item) for item in listing.get("items", [])]
        before = self.store.snapshot() if self.store.synced.is_set() else None
        self.store.replace(items)
        for event_type, obj in list_events(before, items):
            self.on_event(event_type, obj)
        return listing["metadata"].get("resourceVersion")

    def _watch(self, version: str | None, stop: threading.Event) -> tuple[str | None, bool]:
        """Follow the watch; returns (last version seen, whether the version expired)."""
        for event_type, obj in self.api.watch(self.resource, version, self.resync_seconds):
            if stop.is_set():
                break
            if event_type == "ERROR":
                log.info("watch %s expired (%s %s): relisting", self.resource.plural, obj.get("code"),
                         obj.get("reason"))
                return version, True
            version = (obj.get("metadata") or {}).get("resourceVersion") or version
            if event_type != "BOOKMARK":
                self._emit(event_type, self._typed(obj))
        return version, False

    def run(self, stop: threading.Event) -> None:
        version: str | None = None
        listed_at = 0.0
        cause: str | None = "initial"
        while not stop.is_set():
            try:
                if cause:
                    if cause != "initial":
                        self.on_relist(self.resource.plural, cause)
                    version, listed_at, cause = self._list(), self.clock(), None
                version, expired = self._watch(version, stop)
                if expired:
                    cause = "expired"
                elif self.clock() - listed_at >= self.resync_seconds:
                    cause = "resync"
            except ApiError as exc:
                if exc.status == 404:  # CRD not installed (e.g. no coscheduling): none exist; check again later
                    self.store.replace([])
                    cause = cause or "initial"
                    stop.wait(30)
                elif exc.status == 410:
                    cause = "expired"
                elif exc.status == 403:  # not granted list/watch: reads of this kind go to the API server
                    if not self.forbidden:
                        log.warning("cannot watch %s (forbidden): reading them with GETs", self.resource.plural)
                    self.forbidden = True
                    stop.wait(60)
                else:
                    log.warning("watch %s: %s", self.resource.plural, exc.reason)
                    stop.wait(1)
            except Exception as exc:  # connection reset, API server restart: resume from `version`
                log.warning("watch %s: %s", self.resource.plural, exc)
                stop.wait(1)
