"""One HTTPS listener in a daemon thread, for the admission webhooks and the status server.

The serving certificate is re-read when its files change (cert-manager renews it in place, the
kubelet updates the mounted Secret): with `failurePolicy: Fail`, a listener that kept the expired
certificate would make the API server refuse every TrainJob create.

With a client CA the listener answers only clients presenting a certificate that CA signed (the admission
webhooks: the API server, configured with a client certificate for its webhook calls); anyone else fails the
TLS handshake and learns nothing.
"""

from __future__ import annotations

import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def _context(cert_dir: Path, client_ca: Path | None = None) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_dir / "tls.crt", cert_dir / "tls.key")
    if client_ca is not None:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cafile=str(client_ca))
    return context


def _stamp(cert_dir: Path) -> tuple:
    """What changes when either file is rewritten or its Secret symlink is swapped."""
    out: list[tuple[int, int, int] | None] = []
    for name in ("tls.crt", "tls.key"):
        try:
            info = (cert_dir / name).stat()
            out.append((info.st_mtime_ns, info.st_size, info.st_ino))
        except OSError:
            out.append(None)
    return tuple(out)


class _ReloadingServer(ThreadingHTTPServer):
    """Accepts plain TCP and wraps each connection with the current SSL context; before each accept it
    checks the certificate files (two stats) and loads a changed pair. A half-written pair (mid-rotation)
    keeps the previous context and is retried on the next connection. The handshake runs in the
    connection's own thread (on first read), so a slow client never stalls the accept loop."""

    cert_dir: Path
    client_ca: Path | None = None
    stamp: tuple = ()
    context: ssl.SSLContext

    def get_request(self):
        stamp = _stamp(self.cert_dir)
        if stamp != self.stamp:
            try:
                self.context = _context(self.cert_dir, self.client_ca)
                self.stamp = stamp
            except (OSError, ssl.SSLError):
                pass
        sock, address = self.socket.accept()
        return self.context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), address


def serve_https(handler: type[BaseHTTPRequestHandler], address: str, cert_dir: str, name: str,
                client_ca: str | None = None) -> ThreadingHTTPServer:
    """Serve `handler` on host:port with tls.crt/tls.key from `cert_dir` (reloaded when they change); with
    `client_ca` (a PEM file) only to clients whose certificate it signed. Returns the running server."""
    host, port = address.rsplit(":", 1)
    server = _ReloadingServer((host, int(port)), handler)
    server.cert_dir = Path(cert_dir)
    server.client_ca = Path(client_ca) if client_ca else None
    server.stamp = _stamp(server.cert_dir)
    server.context = _context(server.cert_dir, server.client_ca)  # fails here, before serving, on a bad pair
    threading.Thread(target=server.serve_forever, daemon=True, name=name).start()
    return server
