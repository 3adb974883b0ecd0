"""One HTTPS listener in a daemon thread, for the admission webhooks and the status server."""

from __future__ import annotations

import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def serve_https(handler: type[BaseHTTPRequestHandler], address: str, cert_dir: str, name: str) -> ThreadingHTTPServer:
    """Serve `handler` on host:port with tls.crt/tls.key from `cert_dir`; returns the running server."""
    host, port = address.rsplit(":", 1)
    server = ThreadingHTTPServer((host, int(port)), handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(Path(cert_dir) / "tls.crt", Path(cert_dir) / "tls.key")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True, name=name).start()
    return server
