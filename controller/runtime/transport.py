"""HTTPS to the API server with the credentials a kubeconfig or a pod's service account gives.

The controller sends JSON it builds itself and reads JSON back; it needs a connection pool, TLS and a
bearer token or client certificate, nothing of the `kubernetes` client's generated models (importing
them costs the process 40 MiB and a third of a second). Exec credential plugins (`aws eks get-token`,
`gke-gcloud-auth-plugin`, ...) are run as kubectl runs them, for their token; what a kubeconfig can say
beyond this (legacy auth providers, proxies) is refused by name instead of ignored.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import subprocess
import ssl
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Mapping
from pathlib import Path
from urllib.parse import urlencode

import urllib3
import yaml

from trainyard.errors import TrainyardError

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
EXEC_REFRESH_BEFORE = dt.timedelta(seconds=30)  # an exec plugin's token is renewed this long before it expires
TOKEN_REREAD_SECONDS = 60.0  # a projected service-account token is rotated by the kubelet; read it again
SUPPORTED_USER_FIELDS = {"client-certificate", "client-certificate-data", "client-key", "client-key-data", "token",
                         "tokenFile", "exec"}
EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
SUPPORTED_CLUSTER_FIELDS = {"server", "certificate-authority", "certificate-authority-data", "insecure-skip-tls-verify",
                            "tls-server-name", "extensions"}


class ApiError(Exception):
    """The API server answered with an error status; `body` is what it sent (a Status object's JSON)."""

    def __init__(self, status: int, reason: str, body: str = "", headers: dict | None = None):
        super().__init__(f"({status}) {reason}: {body[:300]}")
        self.status, self.reason, self.body, self.headers = status, reason, body, headers or {}


class KubeconfigError(TrainyardError, ValueError):
    """A kubeconfig this transport cannot use, with the field and what to do (the CLI prints it as is)."""


@dataclass(frozen=True)
class ClusterAccess:
    """Where the API server is and how to prove who we are: files or inline PEM, a token or a token file."""
    server: str
    ca_file: str | None = None
    ca_data: bytes | None = None
    cert_file: str | None = None
    cert_data: bytes | None = None
    key_file: str | None = None
    key_data: bytes | None = None
    token: str | None = None
    token_file: str | None = None
    insecure: bool = False
    tls_server_name: str | None = None
    exec_plugin: "ExecPlugin | None" = None


@dataclass(frozen=True)
class ExecPlugin:
    """A kubeconfig's `users[].user.exec`: a command printing an ExecCredential whose status holds a token."""
    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    api_version: str = EXEC_API_VERSIONS[0]


def exec_plugin(entry: object, where: str) -> ExecPlugin:
    if not isinstance(entry, dict) or not isinstance(entry.get("command"), str) or not entry["command"]:
        raise KubeconfigError(f"{where}.command: missing; name the credential plugin to run")
    version = entry.get("apiVersion") or EXEC_API_VERSIONS[0]
    if version not in EXEC_API_VERSIONS:
        raise KubeconfigError(f"{where}.apiVersion: {version!r} is not one of {', '.join(EXEC_API_VERSIONS)}")
    env = tuple((str(item.get("name")), str(item.get("value"))) for item in entry.get("env") or []
                if isinstance(item, dict))
    return ExecPlugin(entry["command"], tuple(str(a) for a in entry.get("args") or []), env, version)


def run_exec_plugin(plugin: ExecPlugin, now: dt.datetime | None = None) -> tuple[str, dt.datetime | None]:
    """Run the plugin as kubectl does (KUBERNETES_EXEC_INFO, not interactive); (token, expiry or None)."""
    info = {"apiVersion": plugin.api_version, "kind": "ExecCredential", "spec": {"interactive": False}}
    env = {**os.environ, **dict(plugin.env), "KUBERNETES_EXEC_INFO": json.dumps(info)}
    try:
        run = subprocess.run([plugin.command, *plugin.args], env=env, capture_output=True, text=True, timeout=60,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise KubeconfigError(f"users[].user.exec.command: {plugin.command!r} could not run ({exc})") from exc
    if run.returncode != 0:
        raise KubeconfigError(f"users[].user.exec.command: {plugin.command!r} exited {run.returncode}: "
                              f"{run.stderr.strip()[-300:]}")
    try:
        status = json.loads(run.stdout).get("status") or {}
    except (ValueError, AttributeError) as exc:
        raise KubeconfigError(f"users[].user.exec.command: {plugin.command!r} printed no ExecCredential JSON") from exc
    token = status.get("token")
    if not isinstance(token, str) or not token:
        raise KubeconfigError(f"users[].user.exec.command: {plugin.command!r} returned no status.token (client "
                              "certificates from a plugin are not supported; use a token-issuing plugin)")
    expiry = status.get("expirationTimestamp")
    return token, dt.datetime.fromisoformat(expiry.replace("Z", "+00:00")) if isinstance(expiry, str) else None


def _relative_to(base: Path, value: str | None) -> str | None:
    """kubeconfig file references are relative to the kubeconfig's own directory."""
    return None if value is None else str(base / value) if not os.path.isabs(value) else value


def _inline(entry: dict, key: str, where: str) -> bytes | None:
    value = entry.get(key)
    if value is None:
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (ValueError, TypeError) as exc:
        raise KubeconfigError(f"{where}.{key}: not base64 ({exc}); paste the PEM file base64-encoded") from exc


def access_from_kubeconfig_document(document: dict, base: Path, context: str | None = None) -> ClusterAccess:
    """The ClusterAccess a parsed kubeconfig's `context` (default: current-context) names."""
    if not isinstance(document, dict):
        raise KubeconfigError("kubeconfig: not a mapping; pass a kubeconfig file (apiVersion: v1, kind: Config)")
    name = context or document.get("current-context")
    if not name:
        raise KubeconfigError("current-context: empty; set it (kubectl config use-context NAME) or pass a context")

    def named(section: str, wanted: str, field: str) -> dict:
        for item in document.get(section) or []:
            if isinstance(item, dict) and item.get("name") == wanted:
                return item.get(field) or {}
        raise KubeconfigError(f"{section}: no entry named {wanted!r}; add it or pick another context")

    ctx = named("contexts", name, "context")
    cluster = named("clusters", ctx.get("cluster", ""), "cluster")
    user = named("users", ctx.get("user", ""), "user") if ctx.get("user") else {}
    for key in sorted(set(user) - SUPPORTED_USER_FIELDS):
        raise KubeconfigError(f"users[{ctx.get('user')}].user.{key}: not supported by trainyard's API client; use a "
                              "client certificate, a token or an exec plugin (a service-account token works everywhere)")
    for key in sorted(set(cluster) - SUPPORTED_CLUSTER_FIELDS):
        raise KubeconfigError(f"clusters[{ctx.get('cluster')}].cluster.{key}: not supported by trainyard's "
                              "API client; remove it")
    if not cluster.get("server"):
        raise KubeconfigError(f"clusters[{ctx.get('cluster')}].cluster.server: missing; set the API server's URL")
    where_cluster, where_user = f"clusters[{ctx.get('cluster')}].cluster", f"users[{ctx.get('user')}].user"
    return ClusterAccess(
        server=str(cluster["server"]).rstrip("/"),
        ca_file=_relative_to(base, cluster.get("certificate-authority")),
        ca_data=_inline(cluster, "certificate-authority-data", where_cluster),
        cert_file=_relative_to(base, user.get("client-certificate")),
        cert_data=_inline(user, "client-certificate-data", where_user),
        key_file=_relative_to(base, user.get("client-key")),
        key_data=_inline(user, "client-key-data", where_user),
        token=user.get("token"), token_file=_relative_to(base, user.get("tokenFile")),
        insecure=bool(cluster.get("insecure-skip-tls-verify")), tls_server_name=cluster.get("tls-server-name"),
        exec_plugin=exec_plugin(user["exec"], f"{where_user}.exec") if "exec" in user else None)


def access_from_kubeconfig(path: str | os.PathLike | None = None, context: str | None = None) -> ClusterAccess:
    """`path`, else $KUBECONFIG's first file, else ~/.kube/config."""
    if path is None:
        path = (os.environ.get("KUBECONFIG") or "").split(os.pathsep)[0] or str(Path.home() / ".kube" / "config")
    file = Path(path)
    try:
        document = yaml.safe_load(file.read_text())
    except OSError as exc:
        raise KubeconfigError(f"kubeconfig {file}: {exc.strerror}; pass --kubeconfig or set KUBECONFIG") from exc
    return access_from_kubeconfig_document(document, file.parent, context)


def access_in_cluster(environ: Mapping[str, str] | None = None,
                      directory: Path = SERVICE_ACCOUNT_DIR) -> ClusterAccess | None:
    """The pod's service account, or None outside a pod (no KUBERNETES_SERVICE_HOST or no token file)."""
    env: Mapping[str, str] = os.environ if environ is None else environ
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
    if not host or not port or not (directory / "token").is_file():
        return None
    host = f"[{host}]" if ":" in host else host
    return ClusterAccess(server=f"https://{host}:{port}", ca_file=str(directory / "ca.crt"),
                         token_file=str(directory / "token"))


def _pem_file(data: bytes, directory: Path, name: str) -> str:
    path = directory / name
    path.write_bytes(data)
    path.chmod(0o600)
    return str(path)


def ssl_context(access: ClusterAccess, scratch: Path | None) -> ssl.SSLContext:
    """Verify the API server against the kubeconfig's CA (or the system's), present the client certificate."""
    context = ssl.create_default_context(cafile=access.ca_file,
                                         cadata=access.ca_data.decode() if access.ca_data else None)
    if access.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    cert = access.cert_file or (_pem_file(access.cert_data, scratch, "client.crt") if access.cert_data and scratch else None)
    key = access.key_file or (_pem_file(access.key_data, scratch, "client.key") if access.key_data and scratch else None)
    if cert:
        context.load_cert_chain(cert, key)
    return context


class Transport:
    """One connection pool to one API server; `request` sends and returns the raw response."""

    def __init__(self, access: ClusterAccess, connections: int = 16):
        self.access = access
        self._token_lock = threading.Lock()
        self._token: tuple[str, float] | None = None
        self._exec: tuple[str, dt.datetime | None] | None = None  # the plugin's token and its expiry
        if access.cert_data or access.key_data:  # inline PEM: written for the ssl module to read once, then gone
            with tempfile.TemporaryDirectory(prefix="trainyard-tls-") as scratch:
                context = ssl_context(access, Path(scratch))
        else:  # nothing written: a pod's root filesystem is read-only and has no /tmp
            context = ssl_context(access, None)
        self.pool = urllib3.PoolManager(
            num_pools=4, maxsize=connections, ssl_context=context,
            server_hostname=access.tls_server_name,
            retries=urllib3.Retry(total=3, redirect=0, raise_on_status=False),
            assert_hostname=False if access.insecure else None)

    def _bearer(self) -> str | None:
        if self.access.token:
            return self.access.token
        if self.access.exec_plugin is not None:
            with self._token_lock:
                now = dt.datetime.now(dt.timezone.utc)
                if self._exec is None or (self._exec[1] is not None and self._exec[1] - now < EXEC_REFRESH_BEFORE):
                    self._exec = run_exec_plugin(self.access.exec_plugin)
                return self._exec[0]
        if not self.access.token_file:
            return None
        with self._token_lock:
            if self._token is None or time.monotonic() - self._token[1] > TOKEN_REREAD_SECONDS:
                self._token = (Path(self.access.token_file).read_text().strip(), time.monotonic())
            return self._token[0]

    def request(self, method: str, path: str, query: dict | None = None, headers: dict | None = None,
                body: bytes | None = None, stream: bool = False) -> urllib3.BaseHTTPResponse:
        """Send; an answer with status >= 400 raises ApiError (with the body the server sent)."""
        url = self.access.server + path + (f"?{urlencode(query)}" if query else "")
        all_headers = dict(headers or {})
        token = self._bearer()
        if token:
            all_headers["Authorization"] = f"Bearer {token}"
        # no answer at all (refused, reset, TLS): urllib3's exception, as callers handle transport failures apart
        response = self.pool.request(method, url, body=body, headers=all_headers, preload_content=not stream,
                                     redirect=False)
        if response.status >= 400:
            if response.status == 401:  # a rotated or expired credential: run the plugin again next time
                self._exec = None
            text = response.data.decode("utf-8", "replace")
            response.release_conn()
            raise ApiError(response.status, response.reason or "", text, dict(response.headers))
        return response
