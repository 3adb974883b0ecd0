"""Local-cluster certificates: a throw-away CA and serving pair for local webhook servers, and client
certificates that make a tenant user (CN = user, O = groups) for trying RBAC and the SDK locally."""

from __future__ import annotations

import base64
import datetime
import ipaddress
import warnings
from pathlib import Path

from cryptography import x509
from cryptography.utils import CryptographyDeprecationWarning
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _new_ca(common_name: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A self-signed CA valid for ten years."""
    now = datetime.datetime.now(datetime.timezone.utc)
    key = _key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def write_serving_pair(directory: Path, common_name: str = "trainyard-local", dns_names: tuple[str, ...] = (),
                       ip_addresses: tuple[str, ...] = ()) -> bytes:
    """Write ca.crt, tls.crt and tls.key (valid for 127.0.0.1, localhost, `dns_names` and `ip_addresses`) and return
    the CA PEM.

    Files already present are reused so restarts keep the caBundle registered in the cluster valid.
    """
    directory.mkdir(parents=True, exist_ok=True)
    ca_file, crt_file, key_file = directory / "ca.crt", directory / "tls.crt", directory / "tls.key"
    if ca_file.exists() and crt_file.exists() and key_file.exists():
        return ca_file.read_bytes()
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key, ca_cert = _new_ca(f"{common_name}-ca")
    ca_name = ca_cert.subject
    key = _key()
    cert = (
        x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in ("localhost", *dns_names)]
                                                   + [x509.IPAddress(ipaddress.ip_address(a))
                                                      for a in ("127.0.0.1", *ip_addresses)]),
                       critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
    key_file.write_bytes(_pem_key(key))
    key_file.chmod(0o600)
    crt_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    ca_file.write_bytes(ca_pem)
    return ca_pem


def ca_bundle(ca_pem: bytes) -> str:
    return base64.b64encode(ca_pem).decode()


def sign_client_certificate(ca_cert_pem: bytes, ca_key_pem: bytes, user: str, groups: tuple[str, ...],
                            days: int = 30) -> tuple[bytes, bytes]:
    """(certificate PEM, key PEM) for `user` in `groups`: the API server maps CN to the user name and
    each O to a group when the certificate is signed by its client CA."""
    with warnings.catch_warnings():  # kwokctl's CA has a non-positive serial; the API server accepts it
        warnings.simplefilter("ignore", CryptographyDeprecationWarning)
        ca_cert = x509.load_pem_x509_certificate(ca_cert_pem)
    ca_key = serialization.load_pem_private_key(ca_key_pem, password=None)
    if not isinstance(ca_key, (rsa.RSAPrivateKey, ec.EllipticCurvePrivateKey)):  # kwokctl's CA is RSA, kind's too
        raise ValueError(f"the cluster's CA key is a {type(ca_key).__name__}, not an RSA or EC key: it cannot sign "
                         "client certificates here")
    subject = x509.Name([*(x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups),
                         x509.NameAttribute(NameOID.COMMON_NAME, user)])
    now = datetime.datetime.now(datetime.timezone.utc)
    key = _key()
    cert = (
        x509.CertificateBuilder().subject_name(subject).issuer_name(ca_cert.subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _pem_key(key)


def write_client_pair(directory: Path, user: str, groups: tuple[str, ...]) -> tuple[Path, Path, Path]:
    """A CA of its own (ca.crt) and a client certificate for `user` in `groups` it signed (client.crt/.key).

    For the API server's calls to real kubelets: the kubelets trust only this CA for client certificates, and
    the API server presents the pair. Returns (ca, certificate, key) paths.
    """
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = _new_ca(f"{user}-ca")
    ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
    cert_pem, key_pem = sign_client_certificate(ca_pem, _pem_key(ca_key), user, groups, days=3650)
    paths = directory / "ca.crt", directory / "client.crt", directory / "client.key"
    for path, content in zip(paths, (ca_pem, cert_pem, key_pem)):
        path.write_bytes(content)
    paths[2].chmod(0o600)
    return paths
