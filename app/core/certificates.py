"""An endpoint's TLS material (mutual TLS): a client certificate chain and its private key, and
a CA bundle to trust for that receiver -- checked when saved, and made into the ``SSLContext``
a worker connects with.

Every check parses for real (pyca ``cryptography``, then OpenSSL itself by building the
context), and each input is bounded in size before it is parsed, so what a tenant uploads costs
a bounded, small amount of CPU (tests/unit/test_certificates.py tries the worst)."""

from __future__ import annotations

import hashlib
import os
import secrets
import ssl
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.x509.oid import ExtendedKeyUsageOID

MAX_CHAIN_BYTES = 32 * 1024
MAX_CHAIN_CERTIFICATES = 10
MAX_BUNDLE_BYTES = 64 * 1024
MAX_BUNDLE_CERTIFICATES = 50
MAX_KEY_BYTES = 8 * 1024
# RSA keys are checked as they load (primality and all), at a cost that grows with the size:
# 4096 bits is as large as receivers ask for, and a bounded cost to check.
MAX_RSA_BITS = 4096
MIN_RSA_BITS = 2048
_CURVES = (ec.SECP256R1, ec.SECP384R1, ec.SECP521R1)
# /dev/shm is memory, not disk: the key file lives there for the moment OpenSSL reads it.
_KEY_FILE_DIR = "/dev/shm" if os.path.isdir("/dev/shm") else None  # noqa: S108


class CertificateError(ValueError):
    """What is wrong with an uploaded certificate, key or bundle, said for a person and never
    quoting what was uploaded."""


@dataclass(frozen=True)
class ClientTLS:
    """What a worker connects to one endpoint with: PEM text, as sealed at rest."""

    client_certificate: str | None
    client_key: str | None = field(repr=False)  # never in a repr, a traceback's locals, a log
    ca_bundle: str | None

    def dump(self) -> dict[str, str | None]:
        return {
            "client_certificate": self.client_certificate,
            "client_key": self.client_key,
            "ca_bundle": self.ca_bundle,
        }

    @classmethod
    def load(cls, value: dict[str, Any]) -> ClientTLS:
        return cls(value.get("client_certificate"), value.get("client_key"), value.get("ca_bundle"))


def _certificates(pem: str, what: str, max_bytes: int, max_count: int) -> list[x509.Certificate]:
    if len(pem.encode()) > max_bytes:
        raise CertificateError(f"{what} is larger than {max_bytes // 1024} KiB")
    if pem.count("-----BEGIN") > max_count:
        raise CertificateError(f"{what} holds more than {max_count} PEM blocks")
    try:
        found = x509.load_pem_x509_certificates(pem.encode())
    except ValueError:
        raise CertificateError(
            f"{what} is not PEM certificates (-----BEGIN CERTIFICATE-----)"
        ) from None
    return found


def chain(pem: str) -> list[x509.Certificate]:
    """The client certificate and any intermediates after it, the leaf first."""
    return _certificates(pem, "client_certificate", MAX_CHAIN_BYTES, MAX_CHAIN_CERTIFICATES)


def bundle(pem: str) -> list[x509.Certificate]:
    return _certificates(pem, "ca_bundle", MAX_BUNDLE_BYTES, MAX_BUNDLE_CERTIFICATES)


PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey


def private_key(pem: str) -> PrivateKey:
    """An unencrypted PEM private key of a kind TLS clients use: RSA 2048-4096 bits, ECDSA on
    P-256/384/521, or Ed25519."""
    if len(pem.encode()) > MAX_KEY_BYTES:
        raise CertificateError(f"client_key is larger than {MAX_KEY_BYTES // 1024} KiB")
    if "ENCRYPTED" in pem:
        raise CertificateError("client_key is encrypted: give the key without a passphrase")
    return _of_a_usable_kind(_parsed_key(pem))


def _parsed_key(pem: str) -> PrivateKeyTypes:
    """The key parsed, an RSA key validated only once its size is one Herald takes: RSA's
    validation costs more the larger the key (an 8192-bit key takes seconds)."""
    try:
        key = serialization.load_pem_private_key(
            pem.encode(), password=None, unsafe_skip_rsa_key_validation=True
        )
        if isinstance(key, rsa.RSAPrivateKey) and MIN_RSA_BITS <= key.key_size <= MAX_RSA_BITS:
            key = serialization.load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError):
        raise CertificateError(
            "client_key is not a PEM private key (-----BEGIN PRIVATE KEY-----)"
        ) from None
    except Exception:
        raise CertificateError("client_key is of a kind Herald cannot use") from None
    return key


def _of_a_usable_kind(key: PrivateKeyTypes) -> PrivateKey:
    if isinstance(key, rsa.RSAPrivateKey):
        if not MIN_RSA_BITS <= key.key_size <= MAX_RSA_BITS:
            raise CertificateError(f"client_key: RSA keys of {MIN_RSA_BITS}-{MAX_RSA_BITS} bits")
        return key
    if isinstance(key, ec.EllipticCurvePrivateKey):
        if not isinstance(key.curve, _CURVES):
            raise CertificateError("client_key: ECDSA keys on P-256, P-384 or P-521")
        return key
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return key
    raise CertificateError("client_key: an RSA, ECDSA or Ed25519 key")


@dataclass(frozen=True)
class Checked:
    """A TLS configuration that passed every check, with what the API shows of it."""

    tls: ClientTLS
    facts: dict[str, Any]


def check(tls: ClientTLS, *, now: datetime | None = None) -> Checked:
    """Every rule for an endpoint's TLS material; raises CertificateError naming the field."""
    now = now or datetime.now(UTC)
    if (tls.client_certificate is None) != (tls.client_key is None):
        raise CertificateError("client_certificate and client_key go together: give both")
    if tls.client_certificate is None and tls.ca_bundle is None:
        raise CertificateError("give client_certificate and client_key, ca_bundle, or both")
    facts: dict[str, Any] = {"client_certificate": None, "ca_bundle": None}
    # What is kept is the material as parsed, written out again: text around or between the
    # PEM blocks is dropped, and OpenSSL reads only what pyca has read.
    kept = ClientTLS(None, None, None)
    if tls.client_certificate is not None and tls.client_key is not None:
        certs = chain(tls.client_certificate)
        key = private_key(tls.client_key)
        with _unreadable("client_certificate"):
            _check_leaf(certs[0], key, now)
            facts["client_certificate"] = certificate_facts(certs[0])
        kept = ClientTLS(_pem(certs), _key_pem(key), None)
    if tls.ca_bundle is not None:
        authorities = bundle(tls.ca_bundle)
        with _unreadable("ca_bundle"):
            facts["ca_bundle"] = {
                "certificates": len(authorities),
                "subjects": [cert.subject.rfc4514_string()[:200] for cert in authorities],
            }
        kept = ClientTLS(kept.client_certificate, kept.client_key, _pem(authorities))
    try:
        context(kept)  # and OpenSSL's own word on it
    except ssl.SSLError as exc:
        raise CertificateError(f"OpenSSL refused the TLS material: {exc.reason or exc}") from None
    return Checked(kept, facts)


@contextmanager
def _unreadable(what: str) -> Iterator[None]:
    """pyca parses a certificate's parts when they are first read: a damaged extension or an
    unknown key algorithm is found here, and raised as its own kind (DuplicateExtension,
    UnsupportedAlgorithm, an ASN.1 error) -- each is the upload's fault, said in words."""
    try:
        yield
    except CertificateError:
        raise
    except Exception:
        raise CertificateError(
            f"{what} holds a certificate whose contents cannot be read "
            "(a damaged extension or an unknown key algorithm)"
        ) from None


def _pem(certs: list[x509.Certificate]) -> str:
    return "".join(cert.public_bytes(serialization.Encoding.PEM).decode() for cert in certs)


def _key_pem(key: PrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def _check_leaf(leaf: x509.Certificate, key: PrivateKey, now: datetime) -> None:
    raw = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    if leaf.public_key().public_bytes(*raw) != key.public_key().public_bytes(*raw):
        raise CertificateError("client_key is not the key of client_certificate (the first one)")
    if leaf.not_valid_after_utc <= now:
        raise CertificateError(
            f"client_certificate expired at {leaf.not_valid_after_utc.isoformat()}"
        )
    if leaf.not_valid_before_utc > now:
        raise CertificateError(
            f"client_certificate is not valid before {leaf.not_valid_before_utc.isoformat()}"
        )
    try:
        usages = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        return
    if ExtendedKeyUsageOID.CLIENT_AUTH not in usages:
        raise CertificateError(
            "client_certificate is not for client authentication (its extended key usage "
            "lacks clientAuth): receivers refuse it"
        )


def certificate_facts(leaf: x509.Certificate) -> dict[str, str]:
    """What identifies a certificate to a person, none of it secret."""
    return {
        "subject": leaf.subject.rfc4514_string()[:500],
        "issuer": leaf.issuer.rfc4514_string()[:500],
        "serial_number": format(leaf.serial_number, "x"),
        "not_before": leaf.not_valid_before_utc.isoformat(),
        "not_after": leaf.not_valid_after_utc.isoformat(),
        "sha256_fingerprint": hashlib.sha256(
            leaf.public_bytes(serialization.Encoding.DER)
        ).hexdigest(),
    }


def context(tls: ClientTLS) -> ssl.SSLContext:
    """The client context for one endpoint: the receiver verified against ``ca_bundle`` alone
    when given (else the system's trust store, as for any endpoint), and the client
    certificate presented when asked for.

    OpenSSL loads a key only from a file: it is written there encrypted, under a passphrase
    that lives in this function alone, and unlinked once read -- the plain key never touches a
    file system."""
    if tls.ca_bundle is not None:
        made = ssl.create_default_context(cadata=tls.ca_bundle)
    else:
        made = ssl.create_default_context()
    if tls.client_certificate is None or tls.client_key is None:
        return made
    passphrase = secrets.token_bytes(32)
    # Checked when saved (private_key): not validated again in every process that loads it.
    key = serialization.load_pem_private_key(
        tls.client_key.encode(), password=None, unsafe_skip_rsa_key_validation=True
    )
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(passphrase),
    )
    with tempfile.NamedTemporaryFile(dir=_KEY_FILE_DIR, suffix=".pem") as file:
        file.write(encrypted + b"\n" + tls.client_certificate.encode())
        file.flush()
        made.load_cert_chain(Path(file.name), password=passphrase)
    return made
