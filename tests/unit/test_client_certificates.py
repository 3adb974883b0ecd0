"""A tenant user's client certificate is signed by the cluster's CA, whatever key type that CA has (kwokctl's
is RSA): the certificate names the user and groups and verifies against the CA."""

from __future__ import annotations

import datetime

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.x509.oid import NameOID

from trainyard.cluster.certs import sign_client_certificate


def _ca(key) -> tuple[bytes, bytes]:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-ca")])
    now = datetime.datetime.now(datetime.timezone.utc)
    algorithm = None if isinstance(key, ed25519.Ed25519PrivateKey) else hashes.SHA256()
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True).sign(key, algorithm))
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


@pytest.mark.parametrize("ca_key", [rsa.generate_private_key(65537, 2048), ec.generate_private_key(ec.SECP256R1())],
                         ids=["rsa", "ec"])
def test_signed_by_the_cas_key_whatever_its_type(ca_key):
    ca_pem, ca_key_pem = _ca(ca_key)
    cert_pem, _ = sign_client_certificate(ca_pem, ca_key_pem, "alice", ("team-a-users", "ci"))
    cert = x509.load_pem_x509_certificate(cert_pem)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "alice"
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == ["team-a-users", "ci"]
    public = x509.load_pem_x509_certificate(ca_pem).public_key()
    if isinstance(public, rsa.RSAPublicKey):
        public.verify(cert.signature, cert.tbs_certificate_bytes, padding.PKCS1v15(), cert.signature_hash_algorithm)
    else:
        assert isinstance(public, ec.EllipticCurvePublicKey)
        public.verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm))


def test_a_ca_key_that_cannot_sign_here_is_named():
    ca_pem, ca_key_pem = _ca(ed25519.Ed25519PrivateKey.generate())
    with pytest.raises(ValueError, match="Ed25519PrivateKey"):
        sign_client_certificate(ca_pem, ca_key_pem, "alice", ())
