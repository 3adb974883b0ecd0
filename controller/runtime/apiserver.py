"""The thin layer that talks to the API server: get, server-side apply, status patch, watch, events.

Everything else in the controller works on plain dicts; this module only moves them over HTTP
with the official `kubernetes` client's ApiClient (auth, TLS, retries of the transport).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterator, Protocol

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from trainyard import k8s as K
from trainyard.timestamps import now_time

from .ratelimit import TokenBucket

FIELD_MANAGER = "trainer"


@dataclass(frozen=True)
class Resource:
    api_version: str
    kind: str
    plural: str
    namespaced: bool = True

    @property
    def base(self) -> str:
        prefix = "/api" if "/" not in self.api_version else "/apis"
        return f"{prefix}/{self.api_version}"

    def path(self, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
        parts = [self.base]
        if self.namespaced and namespace:
            parts += ["namespaces", namespace]
        parts.append(self.plural)
        if name:
            parts.append(name)
        if sub:
            parts.append(sub)
        return "/".join(parts)


RESOURCES = {r.kind: r for r in [
    Resource(K.TRAINER_API_VERSION, "TrainJob", K.TRAINJOBS),
    Resource(K.TRAINER_API_VERSION, "TrainingRuntime", K.TRAININGRUNTIMES),
    Resource(K.TRAINER_API_VERSION, "ClusterTrainingRuntime", K.CLUSTERTRAININGRUNTIMES, namespaced=False),
    Resource(K.JOBSET_API_VERSION, "JobSet", K.JOBSETS),
    Resource(K.VOLCANO_API_VERSION, "PodGroup", K.PODGROUPS),
    Resource(K.VOLCANO_API_VERSION, "Queue", K.QUEUES, namespaced=False),
    Resource("v1", "ConfigMap", "configmaps"),
    Resource("v1", "Secret", "secrets"),
    Resource("v1", "Event", "events"),
    Resource("v1", "Namespace", "namespaces", namespaced=False),
    Resource("v1", "ResourceQuota", "resourcequotas"),
    Resource("scheduling.k8s.io/v1", "PriorityClass", "priorityclasses", namespaced=False),
    Resource("coordination.k8s.io/v1", "Lease", "leases"),
]}
COSCHEDULING_PODGROUP = Resource(K.COSCHEDULING_API_VERSION, "PodGroup", K.PODGROUPS)


def resource_for(obj_or_kind: dict | str, api_version: str | None = None) -> Resource:
    if isinstance(obj_or_kind, dict):
        kind, api_version = obj_or_kind["kind"], obj_or_kind.get("apiVersion")
    else:
        kind = obj_or_kind
    if kind == "PodGroup" and api_version == COSCHEDULING_PODGROUP.api_version:
        return COSCHEDULING_PODGROUP
    return RESOURCES[kind]


def _lines(response) -> Iterator[str]:
    """Split a streamed watch response into its newline-delimited JSON events."""
    buffer = b""
    for chunk in response.stream(amt=65536, decode_content=False):
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield line.decode()
    if buffer.strip():
        yield buffer.decode()


# Apply bodies go out as UTF-8 JSON bytes we serialize ourselves: the client's json.dumps escapes characters
# outside the BMP (an emoji in a Flux script) as surrogate pairs, which the API server's YAML decoder rejects.
# The charset parameter also keeps the client from re-encoding the bytes.
APPLY_CONTENT_TYPE = "application/apply-patch+yaml; charset=utf-8"


def _apply_body(obj: dict) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode("utf-8")


class NotLeader(Exception):
    """A write refused before it left the process: this replica no longer holds the lease."""


WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def resource_of_path(path: str) -> str:
    """The resource (and subresource) a request path names, as kube-apiserver's metrics label it:
    /api/v1/namespaces/ns/configmaps/x -> configmaps; /apis/g/v/namespaces/ns/trainjobs/x/status ->
    trainjobs/status; /api/v1/namespaces/ns -> namespaces."""
    parts = [part for part in path.split("?", 1)[0].split("/") if part]
    rest = parts[2:] if parts[:1] == ["api"] else parts[3:]
    if rest[:1] == ["namespaces"] and len(rest) >= 3:
        rest = rest[2:]
    return "/".join([rest[0]] + rest[2:3]) if rest else ""


class ApiView(Protocol):
    """What reconcile, admission lookups and the gang events use of the API server. `ApiServer` sends every
    call; `cache.CachedReads` serves reads from the informers' stores and may skip a no-op apply (`basis`);
    the unit tests' `FakeApiServer` keeps objects in a dict."""

    def get(self, resource: Resource, name: str, namespace: str | None = None) -> dict | None: ...

    def list(self, resource: Resource, namespace: str | None = None, label_selector: str | None = None,
             field_selector: str | None = None) -> dict: ...

    def apply(self, obj: dict, field_manager: str = FIELD_MANAGER, basis: str | None = None) -> dict: ...

    def patch_status(self, resource: Resource, name: str, namespace: str, status: dict) -> dict: ...

    def delete(self, resource: Resource, name: str, namespace: str | None = None,
               propagation: str = "Foreground") -> None: ...

    def event(self, involved: dict, reason: str, message: str, *, name: str | None = None) -> None: ...


class ApiServer:
    """Dict-in, dict-out access to the API server."""

    def __init__(self, api_client: client.ApiClient, may_write=None, limiter: TokenBucket | None = None,
                 observe=None):
        self.api_client = api_client
        self.may_write = may_write  # None: unguarded; else a predicate checked before every write
        self.limiter = limiter  # client-side qps/burst shared by every request of the process
        self.observe = observe  # observe(method, resource) for every request sent (the manager's metrics)

    def guarded(self, may_write) -> "ApiServer":
        """The same connection, refusing writes while `may_write()` is false (fencing for reconcile
        work that was in flight when the process was paused past its lease: it must not land)."""
        fenced = ApiServer(self.api_client, may_write, self.limiter)
        fenced.observe = self.observe
        return fenced

    def _send(self, method: str, path: str, counted_as: str | None = None, **kwargs):
        """Every request goes out here: rate limit, count (as `counted_as`, default the method), send."""
        if self.limiter:
            self.limiter.acquire()
        if self.observe is not None:
            self.observe(counted_as or method, resource_of_path(path))
        return self.api_client.call_api(path, method, auth_settings=["BearerToken"], _preload_content=False,
                                        _return_http_data_only=True, **kwargs)

    @classmethod
    def from_kubeconfig(cls, kubeconfig: str | None = None, connections: int = 16,
                        limiter: TokenBucket | None = None) -> "ApiServer":
        if kubeconfig:
            api_client = config.new_client_from_config(config_file=kubeconfig)
        else:
            try:
                config.load_incluster_config()
            except config.ConfigException:
                config.load_kube_config()
            api_client = client.ApiClient()
        api_client.configuration.connection_pool_maxsize = connections
        api_client.rest_client.pool_manager.connection_pool_kw["maxsize"] = connections
        return cls(api_client, limiter=limiter)

    def _call(self, method: str, path: str, body=None, query=None, content_type: str = "application/json"):
        if self.may_write is not None and method in WRITE_METHODS and not self.may_write():
            raise NotLeader(f"{method} {path} refused: this replica no longer holds the leader lease")
        headers = {"Accept": "application/json", "Content-Type": content_type}
        response = self._send(method, path, query_params=list((query or {}).items()), header_params=headers, body=body)
        data = response.data
        return json.loads(data) if data else None

    def get(self, resource: Resource, name: str, namespace: str | None = None) -> dict | None:
        try:
            return self._call("GET", resource.path(namespace, name))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def list(self, resource: Resource, namespace: str | None = None, label_selector: str | None = None,
             field_selector: str | None = None) -> dict:
        query = {k: v for k, v in (("labelSelector", label_selector), ("fieldSelector", field_selector)) if v} or None
        return self._call("GET", resource.path(namespace), query=query)

    def apply(self, obj: dict, field_manager: str = FIELD_MANAGER, basis: str | None = None) -> dict:
        """Server-side apply with force: the controller owns every field it writes. Always sent: `basis` is
        for the cached view in front of this one (`cache.CachedReads.apply`), which may skip a no-op."""
        resource = resource_for(obj)
        meta = obj["metadata"]
        return self._call("PATCH", resource.path(meta.get("namespace"), meta["name"]), body=_apply_body(obj),
                          query={"fieldManager": field_manager, "force": "true"}, content_type=APPLY_CONTENT_TYPE)

    def create(self, obj: dict) -> dict:
        resource = resource_for(obj)
        return self._call("POST", resource.path(obj["metadata"].get("namespace")), body=obj)

    def replace(self, obj: dict) -> dict:
        """PUT the whole object; its metadata.resourceVersion makes it a compare-and-swap (409 if it moved)."""
        meta = obj["metadata"]
        return self._call("PUT", resource_for(obj).path(meta.get("namespace"), meta["name"]), body=obj)

    def token_review(self, token: str, audience: str) -> dict:
        """The API server's verdict on a bearer token for one audience (TokenReview status)."""
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                  "spec": {"token": token, "audiences": [audience]}}
        return self._call("POST", "/apis/authentication.k8s.io/v1/tokenreviews", body=review).get("status") or {}

    def apply_status(self, obj: dict, field_manager: str) -> dict:
        """Server-side apply to the status subresource under its own field manager."""
        resource, meta = resource_for(obj), obj["metadata"]
        return self._call("PATCH", resource.path(meta.get("namespace"), meta["name"], "status"), body=_apply_body(obj),
                          query={"fieldManager": field_manager, "force": "true"}, content_type=APPLY_CONTENT_TYPE)

    def patch_status(self, resource: Resource, name: str, namespace: str, status: dict) -> dict:
        return self._call("PATCH", resource.path(namespace, name, "status"), body={"status": status},
                          content_type="application/merge-patch+json")

    def delete(self, resource: Resource, name: str, namespace: str | None = None,
               propagation: str = "Foreground") -> None:
        try:
            self._call("DELETE", resource.path(namespace, name),
                       body={"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation})
        except ApiException as exc:
            if exc.status != 404:
                raise

    def watch(self, resource: Resource, resource_version: str | None = None,
              timeout_seconds: int = 300) -> Iterator[tuple[str, dict]]:
        """(event type, object) pairs; ends after timeout_seconds so callers re-list periodically."""
        query = {"watch": "true", "timeoutSeconds": str(timeout_seconds), "allowWatchBookmarks": "true"}
        if resource_version:
            query["resourceVersion"] = resource_version
        response = self._send("GET", resource.path(), counted_as="WATCH", query_params=list(query.items()),
                              header_params={"Accept": "application/json"})
        try:
            for line in _lines(response):
                event = json.loads(line)
                yield event["type"], event["object"]
        finally:
            response.release_conn()

    def event(self, involved: dict, reason: str, message: str, event_type: str = "Warning",
              action: str = "Reconciling", component: str = "trainjob-controller", name: str | None = None) -> None:
        """`name`: a fixed Event name, so posting the same one twice is refused (409, ignored): deduplication."""
        meta = involved["metadata"]
        now = now_time()
        namespace = meta.get("namespace", "default")
        body = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {**({"name": name} if name else {"generateName": f"{meta['name']}."}),
                         "namespace": namespace},
            "involvedObject": {"apiVersion": involved["apiVersion"], "kind": involved["kind"], "name": meta["name"],
                               "namespace": meta.get("namespace"), "uid": meta.get("uid"),
                               "resourceVersion": meta.get("resourceVersion")},
            "reason": reason, "message": message[:1000], "type": event_type, "action": action,
            "source": {"component": component}, "reportingComponent": component,
            "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        }
        try:
            self._call("POST", RESOURCES["Event"].path(namespace), body=body)
        except ApiException:
            pass  # events are best effort


def as_view(api: ApiServer) -> ApiView:
    """Type-checked: the API server client is an ApiView."""
    return api
