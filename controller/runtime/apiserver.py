"""The thin layer that talks to the API server: get, server-side apply, status patch, watch, events.

Everything else in the controller works on plain dicts; this module only moves them over HTTP
(`transport.Transport`: one connection pool, TLS, the kubeconfig's or service account's credentials).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Protocol

import orjson

from trainyard import k8s as K
from trainyard.timestamps import now_time

from ..pod_refusals import FAILED_CREATE_SELECTOR

from .ratelimit import PerKindLimits
from .transport import ApiError, Transport, access_from_kubeconfig, access_in_cluster

FIELD_MANAGER = "trainer"


@dataclass(frozen=True)
class Resource:
    api_version: str
    kind: str
    plural: str
    namespaced: bool = True
    # A watched subset: every list and watch of this resource carries it (an informer of only these objects).
    field_selector: str = ""

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
    Resource(K.VOLCANO_BUS_API_VERSION, "Command", "commands"),
    Resource("v1", "ConfigMap", "configmaps"),
    Resource("v1", "Secret", "secrets"),
    Resource("v1", "Event", "events"),
    Resource("v1", "Namespace", "namespaces", namespaced=False),
    Resource("v1", "ResourceQuota", "resourcequotas"),
    Resource("scheduling.k8s.io/v1", "PriorityClass", "priorityclasses", namespaced=False),
    Resource("coordination.k8s.io/v1", "Lease", "leases"),
    Resource("v1", "Pod", "pods"),
    Resource("batch/v1", "Job", "jobs"),
    Resource("resource.k8s.io/v1", "ResourceClaimTemplate", "resourceclaimtemplates"),
]}
COSCHEDULING_PODGROUP = Resource(K.COSCHEDULING_API_VERSION, "PodGroup", K.PODGROUPS)
# The Job controller's word that the API server refused a pod (`pod_refusals.py`): watched, kept in a store.
FAILED_CREATE_EVENTS = Resource("v1", "Event", "events", field_selector=FAILED_CREATE_SELECTOR)


def resource_for(obj_or_kind: dict | str, api_version: str | None = None) -> Resource:
    if isinstance(obj_or_kind, dict):
        kind, api_version = obj_or_kind["kind"], obj_or_kind.get("apiVersion")
    else:
        kind = obj_or_kind
    if kind == "PodGroup" and api_version == COSCHEDULING_PODGROUP.api_version:
        return COSCHEDULING_PODGROUP
    return RESOURCES[kind]


def _lines(response) -> Iterator[bytes]:
    """Split a streamed watch response into its newline-delimited JSON events."""
    buffer = b""
    for chunk in response.stream(65536, decode_content=False):
        *lines, buffer = (buffer + chunk).split(b"\n")
        yield from (line for line in lines if line.strip())
    if buffer.strip():
        yield buffer


# Apply bodies go out as UTF-8 JSON: escaping characters outside the BMP (an emoji in a Flux script) as
# surrogate pairs, as json.dumps does, makes the API server's YAML decoder refuse them.
APPLY_CONTENT_TYPE = "application/apply-patch+yaml; charset=utf-8"


def json_body(obj: object) -> bytes:
    """UTF-8 JSON (orjson: a twentieth of json.dumps' time); non-string keys as strings, as json.dumps writes them."""
    return orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS)



class NotLeader(Exception):
    """A write refused before it left the process: this replica no longer holds the lease."""


WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def _split_path(path: str) -> tuple[list[str], list[str]]:
    """(group-version prefix, the rest without a namespaces/<ns> hop): /apis/g/v/namespaces/ns/trainjobs/x/status
    -> (["apis", "g", "v"], ["trainjobs", "x", "status"]); /api/v1/namespaces/ns -> (["api", "v1"], ["namespaces", "ns"])."""
    parts = [part for part in path.split("?", 1)[0].split("/") if part]
    head, rest = (parts[:2], parts[2:]) if parts[:1] == ["api"] else (parts[:3], parts[3:])
    if rest[:1] == ["namespaces"] and len(rest) >= 3:
        rest = rest[2:]
    return head, rest


def resource_of_path(path: str) -> str:
    """The resource (and subresource) a request path names, as kube-apiserver's metrics label it:
    /api/v1/namespaces/ns/configmaps/x -> configmaps; /apis/g/v/namespaces/ns/trainjobs/x/status ->
    trainjobs/status; /api/v1/namespaces/ns -> namespaces."""
    _, rest = _split_path(path)
    return "/".join([rest[0]] + rest[2:3]) if rest else ""


def limit_kind(method: str, path: str) -> str:
    """The client-side bucket a request draws from: upstream's REST client for it, one per group, version and
    kind, a list or watch apart from reads and writes of objects (their kind is `...List`); a subresource
    (status) goes with its object."""
    head, rest = _split_path(path)
    collection = method == "WATCH" or (method == "GET" and len(rest) == 1)
    return "/".join(head + rest[:1]) + (" list" if collection else "")


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
               propagation: str = "Foreground", grace_seconds: int | None = None) -> None: ...

    def event(self, involved: dict, reason: str, message: str, *, name: str | None = None) -> None: ...

    def merge_patch(self, resource: Resource, name: str, patch: dict, namespace: str | None = None) -> dict: ...


class ApiServer:
    """Dict-in, dict-out access to the API server."""

    def __init__(self, transport: Transport, may_write=None, limiter: PerKindLimits | None = None,
                 observe=None):
        self.transport = transport
        self.may_write = may_write  # None: unguarded; else a predicate checked before every write
        self.limiter = limiter  # client-side qps/burst per kind, shared by every request of the process
        self.observe = observe  # observe(method, resource) for every request sent (the manager's metrics)

    def guarded(self, may_write) -> "ApiServer":
        """The same connection, refusing writes while `may_write()` is false (fencing for reconcile
        work that was in flight when the process was paused past its lease: it must not land)."""
        fenced = ApiServer(self.transport, may_write, self.limiter)
        fenced.observe = self.observe
        return fenced

    def _send(self, method: str, path: str, counted_as: str | None = None, **kwargs):
        """Every request goes out here: rate limit, count (as `counted_as`, default the method), send."""
        if self.limiter:
            self.limiter.acquire(limit_kind(counted_as or method, path))
        if self.observe is not None:
            self.observe(counted_as or method, resource_of_path(path))
        return self.transport.request(method, path, **kwargs)

    @classmethod
    def from_kubeconfig(cls, kubeconfig: str | None = None, connections: int = 16,
                        limiter: PerKindLimits | None = None) -> "ApiServer":
        """`kubeconfig`; without one, the pod's service account, else $KUBECONFIG or ~/.kube/config."""
        access = access_from_kubeconfig(kubeconfig) if kubeconfig else (access_in_cluster() or access_from_kubeconfig())
        return cls(Transport(access, connections), limiter=limiter)

    def _call(self, method: str, path: str, body=None, query=None, content_type: str = "application/json"):
        if self.may_write is not None and method in WRITE_METHODS and not self.may_write():
            raise NotLeader(f"{method} {path} refused: this replica no longer holds the leader lease")
        headers = {"Accept": "application/json", "Content-Type": content_type}
        payload = body if body is None or isinstance(body, bytes) else json_body(body)
        data = self._send(method, path, query=query, headers=headers, body=payload).data
        return orjson.loads(data) if data else None

    def get_text(self, path: str, query: dict | None = None) -> str:
        """A GET whose answer is text, not JSON (a pod's log)."""
        return self._send("GET", path, query=query, headers={"Accept": "*/*"}).data.decode(errors="replace")

    def get(self, resource: Resource, name: str, namespace: str | None = None) -> dict | None:
        try:
            return self._call("GET", resource.path(namespace, name))
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def list(self, resource: Resource, namespace: str | None = None, label_selector: str | None = None,
             field_selector: str | None = None) -> dict:
        field_selector = ",".join(s for s in (resource.field_selector, field_selector) if s)
        query = {k: v for k, v in (("labelSelector", label_selector), ("fieldSelector", field_selector)) if v} or None
        return self._call("GET", resource.path(namespace), query=query)

    def apply(self, obj: dict, field_manager: str = FIELD_MANAGER, basis: str | None = None) -> dict:
        """Server-side apply with force: the controller owns every field it writes. Always sent: `basis` is
        for the cached view in front of this one (`cache.CachedReads.apply`), which may skip a no-op."""
        resource = resource_for(obj)
        meta = obj["metadata"]
        return self._call("PATCH", resource.path(meta.get("namespace"), meta["name"]), body=json_body(obj),
                          query={"fieldManager": field_manager, "force": "true"}, content_type=APPLY_CONTENT_TYPE)

    def create(self, obj: dict) -> dict:
        resource = resource_for(obj)
        return self._call("POST", resource.path(obj["metadata"].get("namespace")), body=obj)

    def dry_run_create(self, obj: dict) -> str | None:
        """Create `obj` with `dryRun=All` (every admission layer, nothing stored): None when the API server would
        accept it, else its message. Raised: 401/403 for this caller's own rights (RBAC), and 5xx."""
        resource = resource_for(obj)
        return self._dry_run("create", "POST", resource.path(obj["metadata"].get("namespace")), obj, {})

    def dry_run_apply(self, obj: dict, field_manager: str = FIELD_MANAGER) -> str | None:
        """Server-side apply `obj` as `apply` does, with `dryRun=All` (every admission layer, nothing stored): None
        when the API server would accept it, else its message. Raised: 401/403 for this caller's own rights, 5xx."""
        meta = obj["metadata"]
        return self._dry_run("patch", "PATCH", resource_for(obj).path(meta.get("namespace"), meta["name"]),
                             json_body(obj), {"fieldManager": field_manager, "force": "true"}, APPLY_CONTENT_TYPE)

    def _dry_run(self, verb: str, method: str, path: str, body, query: dict, content_type: str = "application/json"
                 ) -> str | None:
        try:
            self._call(method, path, body=body, query={**query, "dryRun": "All"}, content_type=content_type)
        except ApiError as exc:
            message = api_message(exc)
            if exc.status >= 500 or exc.status == 401 or (exc.status == 403 and f"cannot {verb} resource" in message):
                raise
            return message
        return None

    def replace(self, obj: dict) -> dict:
        """PUT the whole object; its metadata.resourceVersion makes it a compare-and-swap (409 if it moved)."""
        meta = obj["metadata"]
        return self._call("PUT", resource_for(obj).path(meta.get("namespace"), meta["name"]), body=obj)

    def whoami(self) -> str:
        """This client's user name, as the API server authenticates it (a SelfSubjectReview)."""
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        answer = self._call("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", body=review) or {}
        return str(K.mapping(K.mapping(answer.get("status")).get("userInfo")).get("username") or "")

    def token_review(self, token: str, audience: str | None = None) -> dict:
        """The API server's verdict on a bearer token, for one audience or the API server's own (TokenReview
        status)."""
        spec: dict = {"token": token, **({"audiences": [audience]} if audience else {})}
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec}
        return self._call("POST", "/apis/authentication.k8s.io/v1/tokenreviews", body=review).get("status") or {}

    def may_get_path(self, user: Mapping[str, Any], path: str) -> bool:
        """Whether an authenticated user (a TokenReview's userInfo) may `get` a non-resource URL
        (SubjectAccessReview)."""
        spec = {"user": user.get("username", ""), "groups": user.get("groups") or [], "uid": user.get("uid", ""),
                "extra": user.get("extra") or {}, "nonResourceAttributes": {"path": path, "verb": "get"}}
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        answer = self._call("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body=review) or {}
        return bool(K.mapping(answer.get("status")).get("allowed"))

    def apply_status(self, obj: dict, field_manager: str) -> dict:
        """Server-side apply to the status subresource under its own field manager."""
        resource, meta = resource_for(obj), obj["metadata"]
        return self._call("PATCH", resource.path(meta.get("namespace"), meta["name"], "status"), body=json_body(obj),
                          query={"fieldManager": field_manager, "force": "true"}, content_type=APPLY_CONTENT_TYPE)

    def patch_status(self, resource: Resource, name: str, namespace: str, status: dict) -> dict:
        return self._call("PATCH", resource.path(namespace, name, "status"), body={"status": status},
                          content_type="application/merge-patch+json")

    def merge_patch(self, resource: Resource, name: str, patch: dict, namespace: str | None = None) -> dict:
        """A JSON merge patch (lists are replaced whole): for fields other writers share, such as a node's taints."""
        return self._call("PATCH", resource.path(namespace, name), body=patch, content_type="application/merge-patch+json")

    def delete(self, resource: Resource, name: str, namespace: str | None = None,
               propagation: str = "Foreground", grace_seconds: int | None = None) -> None:
        """`grace_seconds`: 0 deletes a pod at once, without waiting for its kubelet to confirm it stopped."""
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation,
                **({"gracePeriodSeconds": grace_seconds} if grace_seconds is not None else {})}
        try:
            self._call("DELETE", resource.path(namespace, name), body=body)
        except ApiError as exc:
            if exc.status != 404:
                raise

    def watch(self, resource: Resource, resource_version: str | None = None,
              timeout_seconds: int = 300) -> Iterator[tuple[str, dict]]:
        """(event type, object) pairs; ends after timeout_seconds so callers re-list periodically."""
        query = {"watch": "true", "timeoutSeconds": str(timeout_seconds), "allowWatchBookmarks": "true"}
        if resource_version:
            query["resourceVersion"] = resource_version
        if resource.field_selector:
            query["fieldSelector"] = resource.field_selector
        response = self._send("GET", resource.path(), counted_as="WATCH", query=query,
                              headers={"Accept": "application/json"}, stream=True)
        try:
            for line in _lines(response):
                event = orjson.loads(line)
                yield event["type"], event["object"]
        finally:
            response.release_conn()

    def event(self, involved: dict, reason: str, message: str, event_type: str = "Warning",
              action: str = "Reconciling", component: str = "trainjob-controller", name: str | None = None) -> None:
        """`name`: a fixed Event name, so posting the same one twice is refused (409, ignored): deduplication."""
        meta = involved["metadata"]
        namespace = meta.get("namespace", "default")
        reference = {"apiVersion": involved["apiVersion"], "kind": involved["kind"], "name": meta["name"],
                     "namespace": meta.get("namespace"), "uid": meta.get("uid"),
                     "resourceVersion": meta.get("resourceVersion")}
        body = event_body(reference, reason, message, event_type=event_type, action=action, component=component,
                          name=name, namespace=namespace)
        try:
            self._call("POST", RESOURCES["Event"].path(namespace), body=body)
        except ApiError:
            pass  # events are best effort


def event_body(involved: dict, reason: str, message: str, *, event_type: str, action: str, component: str,
               name: str | None, namespace: str, now: str | None = None) -> dict:
    """A core/v1 Event about the object `involved` refers to (an ObjectReference); a fixed `name` or one generated
    from the object's."""
    now = now or now_time()
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {**({"name": name} if name else {"generateName": f"{involved['name']}."}), "namespace": namespace},
        "involvedObject": involved, "reason": reason, "message": message[:1000], "type": event_type, "action": action,
        "source": {"component": component}, "reportingComponent": component,
        "firstTimestamp": now, "lastTimestamp": now, "count": 1,
    }


def api_message(exc: ApiError) -> str:
    """The API server's own words for a refusal (the Status body's message)."""
    try:
        return str((orjson.loads(exc.body or b"{}") or {}).get("message") or f"{exc.status} {exc.reason}")
    except (TypeError, ValueError, orjson.JSONDecodeError):
        return str(exc.body or f"{exc.status} {exc.reason}")


def as_view(api: ApiServer) -> ApiView:
    """Type-checked: the API server client is an ApiView."""
    return api
