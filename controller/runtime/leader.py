"""Leader election on a coordination.k8s.io Lease, so several controller replicas are safe.

Same protocol as client-go's leaderelection: the holder renews `renewTime` every retry period;
a candidate takes the lease once `renewTime + leaseDurationSeconds` has passed. Updates carry the
resourceVersion, so two candidates racing for an expired lease cannot both win.
"""

from __future__ import annotations

import datetime as dt
import logging
import socket
import threading
import time
import uuid

from trainyard.timestamps import format_micro_time, parse_time, utc_now

from .apiserver import RESOURCES, ApiServer
from .transport import ApiError

log = logging.getLogger("trainyard.controller.leader")


def lease_expired(lease: dict, now: dt.datetime) -> bool:
    spec = lease.get("spec") or {}
    renew = spec.get("renewTime")
    if not renew or not spec.get("holderIdentity"):
        return True
    return parse_time(renew) + dt.timedelta(seconds=spec.get("leaseDurationSeconds", 15)) < now


class LeaderElector:
    lease_seconds_default = 15

    def __init__(self, api: ApiServer, namespace: str, name: str = "trainyard-controller",
                 identity: str | None = None, lease_seconds: int = lease_seconds_default, retry_seconds: float = 2.0):
        self.api, self.namespace, self.name = api, namespace, name
        self.identity = identity or f"{socket.gethostname()}-{uuid.uuid4().hex[:6]}"
        self.lease_seconds, self.retry_seconds = lease_seconds, retry_seconds
        self.is_leader = threading.Event()
        self.lost = threading.Event()
        self.last_renewed = 0.0
        self.clock = time.monotonic

    @property
    def renew_deadline(self) -> float:
        return self.lease_seconds * 2 / 3

    def holds_lease(self) -> bool:
        """Leader and renewed within the renew deadline by this process's own clock: a replica that was
        paused longer than that may already have been replaced, so it must not act until it renews."""
        return self.is_leader.is_set() and self.clock() - self.last_renewed <= self.renew_deadline

    def _desired(self, lease: dict | None, now: dt.datetime) -> dict:
        spec = dict((lease or {}).get("spec") or {})
        if spec.get("holderIdentity") != self.identity:
            spec["acquireTime"] = format_micro_time(now)
            spec["leaseTransitions"] = spec.get("leaseTransitions", 0) + (1 if lease else 0)
        spec.update({"holderIdentity": self.identity, "leaseDurationSeconds": self.lease_seconds,
                     "renewTime": format_micro_time(now)})
        meta = {"name": self.name, "namespace": self.namespace}
        if lease:
            meta["resourceVersion"] = lease["metadata"]["resourceVersion"]
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": spec}

    def try_acquire_or_renew(self) -> bool:
        resource = RESOURCES["Lease"]
        now = utc_now()
        lease = self.api.get(resource, self.name, self.namespace)
        if lease and lease["spec"].get("holderIdentity") != self.identity and not lease_expired(lease, now):
            return False
        body = self._desired(lease, now)
        try:
            if lease is None:
                self.api.create(body)
            else:
                self.api.replace(body)
        except ApiError as exc:
            if exc.status in (409, 422):  # someone else won the race
                return False
            raise
        return True

    def release(self) -> None:
        """Give the lease up on a clean shutdown, as client-go's ReleaseOnCancel does: a standby takes it at
        its next retry instead of after the lease expires. Writes stop first (`holds_lease` turns false); a
        lease someone else holds by now is left alone, and a failure only means the lease expires as usual."""
        if not self.is_leader.is_set():
            return
        self.is_leader.clear()
        resource = RESOURCES["Lease"]
        try:
            lease = self.api.get(resource, self.name, self.namespace)
            if not lease or lease["spec"].get("holderIdentity") != self.identity:
                return
            spec = {**lease["spec"], "holderIdentity": "", "leaseDurationSeconds": 1,
                    "renewTime": format_micro_time(utc_now())}
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "spec": spec,
                    "metadata": {"name": self.name, "namespace": self.namespace,
                                 "resourceVersion": lease["metadata"]["resourceVersion"]}}
            self.api.replace(body)
            log.info("released the lease %s/%s", self.namespace, self.name)
        except Exception as exc:  # the lease expires on its own
            log.warning("could not release the lease %s/%s: %s", self.namespace, self.name, exc)

    def run(self, stop: threading.Event) -> None:
        """Acquire, then keep renewing; on losing the lease set `lost` (the process must exit).

        A leader that cannot renew keeps leading until the renew deadline (2/3 of the lease), so
        a short API-server hiccup does not cause a restart.
        """
        while not stop.is_set():
            try:
                ok = self.try_acquire_or_renew()
            except ApiError as exc:
                if exc.status == 404:
                    log.warning("lease namespace %s does not exist: create it, or pass --lease-namespace",
                                self.namespace)
                else:
                    log.warning("lease %s/%s: %s %s", self.namespace, self.name, exc.status, exc.reason)
                ok = False
            except Exception as exc:  # API server unavailable: treat as not renewed
                log.warning("lease %s/%s: %s", self.namespace, self.name, exc)
                ok = False
            if ok:
                self.last_renewed = self.clock()
                if not self.is_leader.is_set():
                    log.info("became leader as %s", self.identity)
                    self.is_leader.set()
            elif self.is_leader.is_set() and self.clock() - self.last_renewed > self.renew_deadline:
                log.error("lost the lease %s/%s", self.namespace, self.name)
                self.is_leader.clear()
                self.lost.set()
                return
            stop.wait(self.retry_seconds)
