"""The TrainJob status server (feature gate TrainJobStatus): training pods POST progress and metrics,
which land in `status.trainerStatus` (upstream v2.3 `pkg/statusserver`).

`POST /apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs/{name}/status` with
`{"trainerStatus": {...}}` and `Authorization: Bearer <projected service-account token>`. A caller is
allowed when the token is valid for the audience naming this TrainJob and belongs to a service account
of the TrainJob's namespace. Upstream verifies the token against the cluster's OIDC issuer; trainyard
asks the API server (TokenReview with that audience), which is the same decision without a JWKS
client. Answers are upstream's: metav1.Status bodies for errors, the request echoed on success. Every
replica serves (no leader election), as upstream.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

from trainyard.errors import TrainyardError
from trainyard.timestamps import now_time, parse_time
from trainyard.k8s import TRAINER_API_VERSION, TRAINJOBS

from trainyard import k8s as K
from .. import constants as C
from .https_server import serve_https
from ..plugins.trainjobstatus import token_audience
from .transport import ApiError

log = logging.getLogger("trainyard.status")

MAX_BODY_BYTES = 1 << 16
FIELD_MANAGER = "trainer-status"
_PATH = re.compile(rf"^/apis/{re.escape(TRAINER_API_VERSION)}/namespaces/([^/]+)/{TRAINJOBS}/([^/]+)/status$")
CHECKPOINT_REQUEST_PATH = "/trainyard/v1/namespaces/{namespace}/trainjobs/{name}/checkpoint-request"
"""trainyard's addition (GET, the same token): whether reclaim asked the TrainJob to save a checkpoint
(`scheduling.checkpoints`); the training image's `trainyard_checkpoint` polls it."""
_CHECKPOINT_PATH = re.compile(r"^/trainyard/v1/namespaces/([^/]+)/trainjobs/([^/]+)/checkpoint-request$")
_SERVICE_ACCOUNT = re.compile(r"^system:serviceaccount:([^:]+):[^:]+$")
_INT32 = (-(2**31), 2**31 - 1)


class InvalidPayload(TrainyardError, ValueError):
    pass


def failure(message: str, reason: str, code: int) -> dict:
    """A metav1.Status as upstream encodes it."""
    return {"metadata": {}, "status": "Failure", "message": message, "reason": reason, "code": code}


def route(method: str, path: str) -> tuple[str, str] | None | str:
    """(namespace, name) for the status endpoint, "method" for another method on it, None otherwise."""
    match = _PATH.match(path.split("?", 1)[0])
    if match is None:
        return None
    return (match.group(1), match.group(2)) if method == "POST" else "method"


def checkpoint_route(method: str, path: str) -> tuple[str, str] | None | str:
    """(namespace, name) for a GET of the checkpoint-request endpoint, "method" for another method, else None."""
    match = _CHECKPOINT_PATH.match(path.split("?", 1)[0])
    if match is None:
        return None
    return (match.group(1), match.group(2)) if method == "GET" else "method"


def checkpoint_request(trainjob: dict | None) -> dict:
    """The answer to a checkpoint-request GET: whether one is asked, since when and for which gang."""
    text = (((trainjob or {}).get("metadata") or {}).get("annotations") or {}).get(K.CHECKPOINT_REQUESTED_ANNOTATION)
    try:
        gang, at = str(text).split(" ", 1)
        since = dt.datetime.fromtimestamp(float(at), dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return {"requested": False}
    return {"requested": True, "requestedAt": since, "forGang": gang}


def bearer_token(header: str | None) -> str:
    parts = (header or "").split()
    return parts[1] if len(parts) == 2 and parts[0].lower() == "bearer" else ""


def _int32(value, field: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not _INT32[0] <= value <= _INT32[1]:
        raise InvalidPayload(f"{field} must be a 32-bit integer")
    return value


def _time(value) -> str:
    if not isinstance(value, str):
        raise InvalidPayload("lastUpdatedTime must be an RFC 3339 time")
    try:
        dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidPayload("lastUpdatedTime must be an RFC 3339 time") from None
    return value


def parse_update(body: bytes) -> dict:
    """The request as upstream's typed decoder keeps it: known fields only, types checked (the CRD checks
    ranges, lengths and the required lastUpdatedTime when the status is applied)."""
    try:
        request = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise InvalidPayload("not JSON") from None
    if not isinstance(request, dict):
        raise InvalidPayload("not an object")
    status = request.get("trainerStatus")
    if status is None:
        return {}
    if not isinstance(status, dict):
        raise InvalidPayload("trainerStatus must be an object")
    out: dict = {}
    for key in ("progressPercentage", "estimatedRemainingSeconds"):
        if status.get(key) is not None:
            out[key] = _int32(status[key], key)
    metrics = status.get("metrics")
    if metrics is not None:
        if not isinstance(metrics, list) or not all(isinstance(m, dict) for m in metrics):
            raise InvalidPayload("metrics must be a list of {name, value}")
        out["metrics"] = []
        for metric in metrics:
            if not all(isinstance(metric.get(k, ""), str) for k in ("name", "value")):
                raise InvalidPayload("metric name and value must be strings")
            out["metrics"].append({k: metric[k] for k in ("name", "value") if metric.get(k)})
    if status.get("lastUpdatedTime") is not None:
        out["lastUpdatedTime"] = _time(status["lastUpdatedTime"])
    return {"trainerStatus": out}


def clamped(update: dict, now: str) -> dict:
    """`update` with a lastUpdatedTime after `now` (the server's clock) set to `now`: a report dated in the future
    would keep the TrainJob looking fresh to the stall watch for as long as it likes."""
    status = update.get("trainerStatus") or {}
    reported = status.get("lastUpdatedTime")
    if reported and parse_time(reported) > parse_time(now):
        return {**update, "trainerStatus": {**status, "lastUpdatedTime": now}}
    return update


def status_apply_body(namespace: str, name: str, update: dict) -> dict:
    return {"apiVersion": K.TRAINER_API_VERSION, "kind": C.TRAINJOB_KIND, "metadata": {"name": name, "namespace": namespace},
            "status": {"trainerStatus": update["trainerStatus"]}}


def review_allows(review_status: dict, namespace: str, audience: str) -> bool:
    """A TokenReview's verdict for one TrainJob: authenticated, for its audience, from its namespace."""
    if not review_status.get("authenticated") or audience not in (review_status.get("audiences") or []):
        return False
    match = _SERVICE_ACCOUNT.match((review_status.get("user") or {}).get("username", ""))
    return match is not None and match.group(1) == namespace


class StatusServer:
    """HTTP handling on top of two API calls: `review(token, audience)` and `apply_status(body)`."""

    def __init__(self, review: Callable[[str, str], dict], apply_status: Callable[[dict], dict],
                 clock: Callable[[], str] = now_time, read_trainjob: Callable[[str, str], dict | None] | None = None):
        """`read_trainjob(namespace, name)`: the TrainJob (None: gone); without it, checkpoint requests are 404."""
        self.review = review
        self.apply_status = apply_status
        self.clock = clock
        self.read_trainjob = read_trainjob

    def handle(self, method: str, path: str, headers: dict, read_body: Callable[[int], bytes]) -> tuple[int, dict | str]:
        asked = checkpoint_route(method, path) if self.read_trainjob is not None else None
        target = route(method, path) if asked is None else asked
        if target is None:
            return 404, failure("Not found", "NotFound", 404)
        if isinstance(target, str):
            return 405, "Method Not Allowed\n"
        namespace, name = target
        length = int(headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            return 413, failure("Payload too large", "RequestEntityTooLarge", 413)
        refused = self.refusal(headers, namespace, name)
        if refused is not None:
            return refused
        if asked is not None:
            return self.checkpoint_answer(namespace, name)
        try:
            update = parse_update(read_body(length))
        except InvalidPayload:
            return 422, failure("Invalid payload", "Invalid", 422)
        if not update:
            return 200, {}
        update = clamped(update, self.clock())
        try:
            self.apply_status(status_apply_body(namespace, name, update))
        except ApiError as exc:
            return _api_failure(exc)
        return 200, update

    def refusal(self, headers: dict, namespace: str, name: str) -> tuple[int, dict] | None:
        """None when the caller's token is valid for this TrainJob's audience and namespace, else the answer."""
        token = bearer_token(headers.get("Authorization"))
        audience = token_audience(namespace, name)
        try:
            allowed = bool(token) and review_allows(self.review(token, audience), namespace, audience)
        except Exception as exc:  # the review itself failed: not the caller's fault
            log.warning(json.dumps({"msg": "token review failed", "error": str(exc)[:300]}))
            return 500, failure("Internal error", "InternalError", 500)
        return None if allowed else (403, failure("Forbidden", "Forbidden", 403))

    def checkpoint_answer(self, namespace: str, name: str) -> tuple[int, dict]:
        assert self.read_trainjob is not None
        try:
            trainjob = self.read_trainjob(namespace, name)
        except ApiError as exc:
            log.warning(json.dumps({"msg": "reading the TrainJob failed", "code": exc.status}))
            return 500, failure("Internal error", "InternalError", 500)
        if trainjob is None:
            return 404, failure("Train job not found", "NotFound", 404)
        return 200, checkpoint_request(trainjob)


def _api_failure(exc: ApiError) -> tuple[int, dict]:
    if exc.status in (400, 422):
        try:
            message = json.loads(exc.body or "{}").get("message") or ""
        except ValueError:
            message = ""
        return 422, failure(message or f"Validation failed: {exc.reason}", "Invalid", 422)
    if exc.status == 404:
        return 404, failure("Train job not found", "NotFound", 404)
    log.warning(json.dumps({"msg": "status update failed", "code": exc.status}))
    return 500, failure("Internal error", "InternalError", 500)


def serve_status(server: StatusServer, address: str, cert_dir: str) -> ThreadingHTTPServer:
    """Serve HTTPS on `address` with tls.crt/tls.key from `cert_dir` (the webhook's serving pair)."""

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, method: str) -> None:
            code, payload = server.handle(method, self.path, dict(self.headers.items()), self.rfile.read)
            body = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "text/plain; charset=utf-8" if isinstance(payload, str) else "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):  # noqa: N802 (http.server API)
            self._answer("POST")

        def do_GET(self):  # noqa: N802
            self._answer("GET")

        def do_PUT(self):  # noqa: N802
            self._answer("PUT")

        def log_message(self, *args):
            pass

    httpd = serve_https(Handler, address, cert_dir, "status-server")
    log.info(json.dumps({"msg": "serving the TrainJob status server", "address": address}))
    return httpd
