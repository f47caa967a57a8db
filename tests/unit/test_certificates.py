"""app/core/certificates.py: an endpoint's TLS material checked for real -- each rule refused with a
message naming the field and quoting nothing uploaded, inputs bounded before they are parsed,
and whatever a tenant uploads (fuzzed) either passes or is refused, never anything else."""

from __future__ import annotations

import base64
import ssl
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import dsa, ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.core import certificates
from app.core.certificates import CertificateError, ClientTLS
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


def _der_with_extensions(key: ec.EllipticCurvePrivateKey, *oids: str) -> bytes:
    now = datetime.now(UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "hostile")])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=1))
    )
    for oid in oids:
        builder = builder.add_extension(
            x509.UnrecognizedExtension(x509.ObjectIdentifier(oid), b"\x05\x00"), critical=False
        )
    return builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.DER)


def _pem_of(der: bytes) -> str:
    body = base64.encodebytes(der).decode()
    return f"-----BEGIN CERTIFICATE-----\n{body}-----END CERTIFICATE-----\n"


def test_certificates_damaged_inside_their_der_are_refused_in_words() -> None:
    """Well-formed PEM whose DER pyca parses lazily: a duplicated extension, an unknown key
    algorithm, an extended key usage that is not one -- each raised by pyca as its own kind
    when first read, each refused as the upload's fault (never a 500)."""
    key = ec.generate_private_key(ec.SECP256R1())
    key_pem = _key_pem(key)

    def oid(last: int) -> bytes:  # 1.2.3.<last>, as DER encodes it
        return bytes([0x06, 3, 0x2A, 3, last])

    twice = _der_with_extensions(key, "1.2.3.4", "1.2.3.5").replace(oid(5), oid(4))
    ec_public_key = bytes.fromhex("06072a8648ce3d0201")
    unknown_algorithm = _der_with_extensions(key).replace(
        ec_public_key, bytes.fromhex("06072a8648ce3d0209")
    )
    not_an_eku = _der_with_extensions(key, "1.2.3.4").replace(
        oid(4), bytes([0x06, 3, 0x55, 0x1D, 0x25])
    )
    for der in (twice, unknown_algorithm, not_an_eku):
        said = _refusal(ClientTLS(_pem_of(der), key_pem, None))
        assert said.startswith("client_certificate holds a certificate whose contents cannot")


def test_an_rsa_key_too_large_is_refused_before_it_is_validated() -> None:
    """RSA validation costs more the larger the key: a 4608-bit key (within the byte bound)
    is refused by its size, which is read before the key is validated."""
    big = _key_pem(rsa.generate_private_key(65537, 4608))
    assert len(big.encode()) < certificates.MAX_KEY_BYTES
    with pytest.raises(CertificateError, match="RSA keys of 2048-4096 bits"):
        certificates.private_key(big)


def test_the_key_stays_out_of_reprs(authority: Authority) -> None:
    cert, key = authority.client_certificate("a")
    assert key.splitlines()[1] not in repr(ClientTLS(cert, key, None))
