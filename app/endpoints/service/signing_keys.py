"""An endpoint's ed25519 key pair for Standard Webhooks ``v1a`` signatures, serialised as the
specification asks: ``whsk_`` + base64 of the 32-byte private key (RFC 8032's seed), ``whpk_``
+ base64 of the 32-byte public key. The private key is sealed at rest (app/core/sealing.py); the
public key is the receiver's to hold, readable by API and in the console."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
)

PRIVATE_PREFIX = "whsk_"
PUBLIC_PREFIX = "whpk_"


@dataclass(frozen=True)
class KeyPair:
    private: str  # whsk_...
    public: str  # whpk_...


def generate_key_pair() -> KeyPair:
    key = Ed25519PrivateKey.generate()
    return KeyPair(private=_private_text(key), public=public_key_of(key))


def _private_text(key: Ed25519PrivateKey) -> str:
    raw = key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    return PRIVATE_PREFIX + base64.b64encode(raw).decode()


def public_key_of(key: Ed25519PrivateKey) -> str:
    raw = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return PUBLIC_PREFIX + base64.b64encode(raw).decode()


class BadSigningKey(ValueError):
    """A stored private key that is no ``whsk_`` ed25519 key; says so without the key."""


def private_key(text: str) -> Ed25519PrivateKey:
    """The key of a ``whsk_`` string."""
    if not text.startswith(PRIVATE_PREFIX):
        raise BadSigningKey("the signing key is not a whsk_ key")
    try:
        raw = base64.b64decode(text[len(PRIVATE_PREFIX) :], validate=True)
    except (binascii.Error, ValueError):
        raise BadSigningKey("the signing key is not base64") from None
    if len(raw) != 32:
        raise BadSigningKey("the signing key is not 32 bytes")
    return Ed25519PrivateKey.from_private_bytes(raw)
