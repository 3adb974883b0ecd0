"""The controller's Prometheus endpoint, as Kubeflow Trainer v2.4 serves it (kubeflow/trainer#3912).

Plain HTTP by default on the local cluster (loopback); with `--metrics-secure` over HTTPS with the webhook's serving
pair (reloaded when it is renewed, `https_server`); with `--metrics-auth` as well, only to callers the API server
authenticates (a TokenReview of the bearer token) and authorizes to `get` the non-resource URL `/metrics` (a
SubjectAccessReview), as controller-runtime's `WithAuthenticationAndAuthorization` filter does: 401 without a token
the API server accepts, 403 without the right. A Prometheus scraping it needs a ServiceAccount bound to the
ClusterRole `trainyard-metrics-reader` and the webhook's CA.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Mapping

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from .https_server import serve_https

METRICS_PATH = "/metrics"

Review = Callable[[str], Mapping[str, Any]]
"""A bearer token -> the TokenReview's status."""
Access = Callable[[Mapping[str, Any]], bool]
"""An authenticated user (the TokenReview's userInfo) -> may it get /metrics (the SubjectAccessReview's allowed)."""


@dataclass(frozen=True)
class Verdict:
    status: int
    message: str


def authorize(header: str | None, review: Review, access: Access) -> Verdict:
    """The filter's answer for one request's Authorization header."""
    scheme, _, token = (header or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return Verdict(401, "Unauthorized: a bearer token is required")
    status = review(token.strip())
    if not status.get("authenticated"):
        return Verdict(401, "Unauthorized: the API server does not accept this token")
    user = status.get("user") or {}
    if not access(user):
        return Verdict(403, f"Forbidden: user {user.get('username', '')!r} may not get path {METRICS_PATH!r}")
    return Verdict(200, "")


def serve_metrics(registry: CollectorRegistry, address: str, cert_dir: str | None = None,
                  review: Review | None = None, access: Access | None = None) -> ThreadingHTTPServer:
    """Serve `registry` on host:port: HTTPS with `cert_dir`'s pair when given, and with `review` and `access` only to
    callers they admit (`authorize`). Returns the running server."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server API)
            if self.path.split("?", 1)[0] != METRICS_PATH:
                return self._answer(404, b"not found", "text/plain")
            if review is not None and access is not None:
                verdict = authorize(self.headers.get("Authorization"), review, access)
                if verdict.status != 200:
                    return self._answer(verdict.status, verdict.message.encode(), "text/plain")
            self._answer(200, generate_latest(registry), CONTENT_TYPE_LATEST)

        def _answer(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):  # keep scrapes out of the logs
            pass

    if cert_dir is not None:
        return serve_https(Handler, address, cert_dir, "metrics")
    host, port = address.rsplit(":", 1)
    server = ThreadingHTTPServer((host, int(port)), Handler)
    threading.Thread(target=server.serve_forever, daemon=True, name="metrics").start()
    return server
