"""The webhook / status HTTPS listener serves a rotated certificate without a restart (issue 14.4).

Real TLS on 127.0.0.1: the files are replaced as cert-manager's renewal (or a kubelet Secret update)
replaces them, and the next connection verifies against the new CA only.
"""

import shutil
import ssl
import urllib.request
from http.server import BaseHTTPRequestHandler

import pytest

from trainyard.cluster.certs import write_serving_pair
from trainyard.controller.runtime.https_server import serve_https


class Hello(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


def get(port: int, ca_pem: bytes) -> bytes:
    context = ssl.create_default_context(cadata=ca_pem.decode())
    with urllib.request.urlopen(f"https://127.0.0.1:{port}/", context=context, timeout=5) as response:
        return response.read()


@pytest.fixture
def server(tmp_path):
    live = tmp_path / "live"
    first_ca = write_serving_pair(live)
    httpd = serve_https(Hello, "127.0.0.1:0", str(live), "test-https")
    yield httpd, live, first_ca, tmp_path
    httpd.shutdown()
    httpd.server_close()


def test_rotated_certificate_is_served_without_a_restart(server):
    httpd, live, first_ca, tmp_path = server
    port = httpd.server_address[1]
    assert get(port, first_ca) == b"ok"
    second_ca = write_serving_pair(tmp_path / "renewed", common_name="trainyard-renewed")
    for name in ("tls.key", "tls.crt"):
        shutil.copy(tmp_path / "renewed" / name, live / name)
    assert get(port, second_ca) == b"ok"
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        get(port, first_ca)


def test_half_written_pair_keeps_serving_the_previous_certificate(server):
    httpd, live, first_ca, _ = server
    port = httpd.server_address[1]
    (live / "tls.key").write_text("not a key yet")
    assert get(port, first_ca) == b"ok"
