"""The controller's own API-server client: what it takes from a kubeconfig or a pod's service account, what it
refuses by name, and what goes over the wire (a local HTTP server stands in for the address, not the logic:
the whole integration suite drives the real API server through it)."""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from trainyard.controller.runtime.apiserver import RESOURCES, ApiServer
from trainyard.controller.runtime.transport import (
    ApiError,
    ClusterAccess,
    KubeconfigError,
    Transport,
    access_from_kubeconfig,
    access_from_kubeconfig_document,
    access_in_cluster,
)

PEM = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def kubeconfig(user: dict, cluster: dict | None = None, current: str = "ctx") -> dict:
    return {"apiVersion": "v1", "kind": "Config", "current-context": current,
            "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
            "clusters": [{"name": "c", "cluster": cluster or {"server": "https://127.0.0.1:6443/",
                                                              "certificate-authority": "ca.crt"}}],
            "users": [{"name": "u", "user": user}]}


def test_file_references_are_relative_to_the_kubeconfig_and_the_server_loses_its_slash(tmp_path):
    access = access_from_kubeconfig_document(kubeconfig({"client-certificate": "u.crt", "client-key": "/abs/u.key"}),
                                             tmp_path)
    assert access == ClusterAccess(server="https://127.0.0.1:6443", ca_file=str(tmp_path / "ca.crt"),
                                   cert_file=str(tmp_path / "u.crt"), key_file="/abs/u.key")


def test_inline_data_is_decoded_and_a_token_kept(tmp_path):
    doc = kubeconfig({"token": "abc"}, {"server": "https://k", "certificate-authority-data": base64.b64encode(PEM).decode(),
                                        "insecure-skip-tls-verify": True})
    access = access_from_kubeconfig_document(doc, tmp_path)
    assert (access.ca_data, access.token, access.insecure) == (PEM, "abc", True)


@pytest.mark.parametrize("mutate, field", [
    (lambda d: d.update({"current-context": ""}), "current-context"),
    (lambda d: d.update({"current-context": "other"}), "contexts: no entry named 'other'"),
    (lambda d: d["users"][0]["user"].update({"auth-provider": {"name": "gcp"}}), "users[u].user.auth-provider: not supported"),
    (lambda d: d["users"][0]["user"].update({"exec": {"args": ["x"]}}), "users[u].user.exec.command: missing"),
    (lambda d: d["users"][0]["user"].update({"exec": {"command": "x", "apiVersion": "v0"}}), "exec.apiVersion: 'v0'"),
    (lambda d: d["clusters"][0]["cluster"].update({"proxy-url": "http://p"}), "clusters[c].cluster.proxy-url"),
    (lambda d: d["clusters"][0]["cluster"].pop("server"), "clusters[c].cluster.server: missing"),
    (lambda d: d["users"][0]["user"].update({"client-key-data": "%%%"}), "users[u].user.client-key-data: not base64"),
], ids=["no-context", "unknown-context", "auth-provider", "exec-no-command", "exec-bad-version", "proxy", "no-server",
        "bad-base64"])
def test_what_the_client_cannot_use_is_refused_naming_the_field(tmp_path, mutate, field):
    doc = kubeconfig({"token": "t"})
    mutate(doc)
    with pytest.raises(KubeconfigError, match=field.replace("[", r"\[").replace("]", r"\]")):
        access_from_kubeconfig_document(doc, tmp_path)


def test_a_missing_kubeconfig_file_says_how_to_pass_one(tmp_path):
    with pytest.raises(KubeconfigError, match="pass --kubeconfig or set KUBECONFIG"):
        access_from_kubeconfig(tmp_path / "nope.yaml")


def test_in_cluster_access_comes_from_the_service_account_and_the_service_env(tmp_path):
    (tmp_path / "token").write_text("tok\n")
    access = access_in_cluster({"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}, tmp_path)
    assert access == ClusterAccess(server="https://[fd00::1]:443", ca_file=str(tmp_path / "ca.crt"),
                                   token_file=str(tmp_path / "token"))
    assert access_in_cluster({}, tmp_path) is None
    assert access_in_cluster({"KUBERNETES_SERVICE_HOST": "h", "KUBERNETES_SERVICE_PORT": "1"}, tmp_path / "x") is None


class Recorder(BaseHTTPRequestHandler):
    """Answers like an API server would: 404 with a Status body for /missing, an apply echo otherwise."""
    seen: list[dict] = []

    def _answer(self) -> None:
        if "watch=true" in self.path:
            return self._watch()
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        Recorder.seen.append({"method": self.command, "path": self.path, "auth": self.headers.get("Authorization"),
                              "type": self.headers.get("Content-Type"), "body": body})
        status, answer = (404, {"kind": "Status", "message": "not found", "code": 404}) if "missing" in self.path or b"missing" in body \
            else (200, {"kind": "ConfigMap", "metadata": {"name": "x"}})
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _watch(self) -> None:
        """Three events, one of them larger than a read chunk, and blank keep-alive lines between."""
        events = [{"type": "ADDED", "object": {"metadata": {"name": "a", "resourceVersion": "1"}}},
                  {"type": "MODIFIED", "object": {"metadata": {"name": "big", "resourceVersion": "2"},
                                                  "data": {"k": "x" * 200_000}}},
                  {"type": "DELETED", "object": {"metadata": {"name": "a", "resourceVersion": "3"}}}]
        data = b"\n\n".join(json.dumps(e).encode() for e in events)  # the last event without its newline
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_PATCH = do_POST = do_DELETE = _answer

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    Recorder.seen.clear()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_requests_carry_the_token_from_the_file_and_apply_goes_as_utf8_json(server, tmp_path: Path):
    (tmp_path / "token").write_text("secret-1\n")
    api = ApiServer(Transport(ClusterAccess(server=server, token_file=str(tmp_path / "token"))))
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "ns"}, "data": {"s": "\U0001F600"}}
    assert api.apply(cm)["metadata"]["name"] == "x"
    (sent,) = Recorder.seen
    assert sent["method"] == "PATCH" and sent["auth"] == "Bearer secret-1"
    assert sent["path"] == "/api/v1/namespaces/ns/configmaps/x?fieldManager=trainer&force=true"
    assert sent["type"].startswith("application/apply-patch+yaml") and "\U0001F600".encode() in sent["body"]


def test_not_found_reads_as_none_and_other_errors_carry_the_servers_status(server):
    api = ApiServer(Transport(ClusterAccess(server=server, token="t")))
    assert api.get(RESOURCES["ConfigMap"], "missing", "ns") is None
    with pytest.raises(ApiError) as raised:
        api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "missing", "namespace": "ns"}})
    assert raised.value.status == 404 and json.loads(raised.value.body)["message"] == "not found"
    api.delete(RESOURCES["ConfigMap"], "missing", "ns")  # already gone: not an error


def test_a_watch_yields_each_event_once_whatever_the_chunking(server):
    api = ApiServer(Transport(ClusterAccess(server=server, token="t")))
    events = [(kind, obj["metadata"]["name"], len((obj.get("data") or {}).get("k", "")))
              for kind, obj in api.watch(RESOURCES["ConfigMap"], "7", timeout_seconds=5)]
    assert events == [("ADDED", "a", 0), ("MODIFIED", "big", 200_000), ("DELETED", "a", 0)]


def test_a_pod_without_a_writable_tmp_still_connects(tmp_path, monkeypatch):
    """In cluster the root filesystem is read-only: only inline client keys may need a scratch file."""
    import tempfile

    def no_tmp(*args, **kwargs):
        raise FileNotFoundError("No usable temporary directory found")

    monkeypatch.setattr(tempfile, "TemporaryDirectory", no_tmp)
    (tmp_path / "token").write_text("t")
    Transport(ClusterAccess(server="https://10.96.0.1:443", token_file=str(tmp_path / "token")))


def test_inline_client_certificates_are_loaded_and_leave_no_file(tmp_path, monkeypatch):
    from trainyard.cluster.certs import write_client_pair

    ca, cert, key = write_client_pair(tmp_path / "pair", "alice", ("team-a",))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "scratch"))
    (tmp_path / "scratch").mkdir()
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    transport = Transport(ClusterAccess(server="https://127.0.0.1:6443", ca_data=ca.read_bytes(),
                                        cert_data=cert.read_bytes(), key_data=key.read_bytes()))
    assert transport.pool.connection_pool_kw["ssl_context"] is not None
    assert list((tmp_path / "scratch").iterdir()) == []  # the key written for the ssl module is gone


PLUGIN = """#!/bin/sh
# a credential plugin: counts its runs, checks kubectl's contract, prints an ExecCredential
echo run >> "$RUNS"
case "$KUBERNETES_EXEC_INFO" in *'"interactive": false'*) ;; *) echo "no exec info" >&2; exit 3;; esac
printf '{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": {"token": "%s-%s", "expirationTimestamp": "%s"}}' "$PREFIX" "$1" "$EXPIRES"
"""


def plugin_access(tmp_path: Path, server: str, expires: str) -> ClusterAccess:
    script = tmp_path / "plugin.sh"
    script.write_text(PLUGIN)
    script.chmod(0o755)
    doc = kubeconfig({"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(script), "args": ["eks"],
                               "env": [{"name": "PREFIX", "value": "tok"}, {"name": "RUNS", "value": str(tmp_path / "runs")},
                                       {"name": "EXPIRES", "value": expires}]}},
                     {"server": server})
    return access_from_kubeconfig_document(doc, tmp_path)


def test_an_exec_plugins_token_is_sent_and_reused_until_it_nearly_expires(server, tmp_path):
    api = ApiServer(Transport(plugin_access(tmp_path, server, "2999-01-01T00:00:00Z")))
    api.get(RESOURCES["ConfigMap"], "x", "ns")
    api.get(RESOURCES["ConfigMap"], "x", "ns")
    assert [seen["auth"] for seen in Recorder.seen] == ["Bearer tok-eks"] * 2
    assert (tmp_path / "runs").read_text().count("run") == 1

    expired = ApiServer(Transport(plugin_access(tmp_path, server, "2000-01-01T00:00:00Z")))
    expired.get(RESOURCES["ConfigMap"], "x", "ns")
    expired.get(RESOURCES["ConfigMap"], "x", "ns")
    assert (tmp_path / "runs").read_text().count("run") == 3  # an expired token is asked for again


def test_a_failing_exec_plugin_says_which_and_why(tmp_path):
    doc = kubeconfig({"exec": {"command": "/bin/false"}}, {"server": "https://127.0.0.1:9"})
    transport = Transport(access_from_kubeconfig_document(doc, tmp_path))
    with pytest.raises(KubeconfigError, match="'/bin/false' exited 1"):
        transport.request("GET", "/api")
