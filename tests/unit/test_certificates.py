"""app/certificates.py: an endpoint's TLS material checked for real -- each rule refused with a
message naming the field and quoting nothing uploaded, inputs bounded before they are parsed,
and whatever a tenant uploads (fuzzed) either passes or is refused, never anything else."""

from __future__ import annotations

import ssl
from datetime import timedelta
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import dsa, ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app import certificates
from app.certificates import CertificateError, ClientTLS
from tests.fixtures.tls import Authority


@pytest.fixture(scope="module")
def authority(tmp_path_factory: pytest.TempPathFactory) -> Authority:
    return Authority(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def fuzzed(authority: Authority) -> dict[str, str]:
    """One set of material for every example: hypothesis replays draws against the same text."""
    cert, key = authority.client_certificate("fuzzed")
    return {"client_certificate": cert, "client_key": key, "ca_bundle": authority.ca_pem()}


def _key_pem(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | dsa.DSAPrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def _refusal(tls: ClientTLS) -> str:
    with pytest.raises(CertificateError) as raised:
        certificates.check(tls)
    return str(raised.value)


def test_good_material_passes_with_what_identifies_it(authority: Authority) -> None:
    cert, key = authority.client_certificate("billing-sender")
    checked = certificates.check(ClientTLS(cert, key, authority.ca_pem()))
    leaf = checked.facts["client_certificate"]
    assert (leaf["subject"], leaf["issuer"]) == ("CN=billing-sender", "CN=Herald test CA")
    assert len(leaf["sha256_fingerprint"]) == 64
    assert checked.facts["ca_bundle"] == {"certificates": 1, "subjects": ["CN=Herald test CA"]}
    assert isinstance(certificates.context(checked.tls), ssl.SSLContext)


def test_a_ca_bundle_alone_is_material_too(authority: Authority) -> None:
    checked = certificates.check(ClientTLS(None, None, authority.ca_pem()))
    assert checked.facts["client_certificate"] is None


def test_each_rule_is_refused_naming_the_field(authority: Authority, tmp_path: Path) -> None:
    cert, key = authority.client_certificate("a")
    _, other_key = authority.client_certificate("b")
    expired, expired_key = authority.client_certificate("old", valid_for=timedelta(hours=-1))
    server_only, server_key = authority.client_certificate(
        "server", usages=[ExtendedKeyUsageOID.SERVER_AUTH]
    )
    encrypted = (
        serialization.load_pem_private_key(key.encode(), None)
        .private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"passphrase"),
        )
        .decode()
    )
    small_rsa = _key_pem(rsa.generate_private_key(65537, 1024))  # noqa: S505  (refused: the point)
    dsa_key = _key_pem(dsa.generate_private_key(2048))
    secp256k1 = _key_pem(ec.generate_private_key(ec.SECP256K1()))
    cases = {
        "client_key is not the key of client_certificate": ClientTLS(cert, other_key, None),
        "client_certificate expired at": ClientTLS(expired, expired_key, None),
        "is not for client authentication": ClientTLS(server_only, server_key, None),
        "client_key is encrypted": ClientTLS(cert, encrypted, None),
        "client_key: RSA keys of 2048-4096 bits": ClientTLS(cert, small_rsa, None),
        "client_key: an RSA, ECDSA or Ed25519 key": ClientTLS(cert, dsa_key, None),
        "client_key: ECDSA keys on P-256": ClientTLS(cert, secp256k1, None),
        "client_certificate and client_key go together": ClientTLS(cert, None, None),
        "give client_certificate and client_key, ca_bundle, or both": ClientTLS(None, None, None),
        "client_certificate is not PEM certificates": ClientTLS(key, key, None),
        "client_key is not a PEM private key": ClientTLS(cert, cert, None),
        "ca_bundle is not PEM certificates": ClientTLS(None, None, "hello"),
    }
    for expected, tls in cases.items():
        said = _refusal(tls)
        assert expected in said, (expected, said)
        for secret_line in key.splitlines()[1:-1]:
            assert secret_line not in said


def test_sizes_and_counts_are_bounded_before_anything_is_parsed(authority: Authority) -> None:
    ca = authority.ca_pem()
    too_many = ca * (certificates.MAX_BUNDLE_CERTIFICATES + 1)
    assert len(too_many.encode()) < certificates.MAX_BUNDLE_BYTES  # the count refuses it
    assert "more than 50 PEM blocks" in _refusal(ClientTLS(None, None, too_many))
    padded = ca + "\n" * certificates.MAX_BUNDLE_BYTES
    assert "larger than 64 KiB" in _refusal(ClientTLS(None, None, padded))
    cert, key = authority.client_certificate("a")
    assert "larger than 8 KiB" in _refusal(ClientTLS(cert, key + " " * 8192, None))
    # The most a bundle may hold is parsed, and passes.
    most = ca * certificates.MAX_BUNDLE_CERTIFICATES
    assert certificates.check(ClientTLS(None, None, most)).facts["ca_bundle"]["certificates"] == 50


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_mangling_of_the_material_passes_or_is_refused_never_anything_else(
    fuzzed: dict[str, str], data: st.DataObject
) -> None:
    fields, key = dict(fuzzed), fuzzed["client_key"]
    target = data.draw(st.sampled_from(sorted(fields)))
    text = fields[target]
    at = data.draw(st.integers(0, len(text)))
    cut = data.draw(st.integers(0, 40))
    inserted = data.draw(st.text(max_size=40))
    fields[target] = text[:at] + inserted + text[at + cut :]
    said = ""
    try:
        certificates.check(ClientTLS(**fields))
    except CertificateError as exc:  # anything else fails the test: a 500 at the API
        said = str(exc)
    assert key.splitlines()[1] not in said
