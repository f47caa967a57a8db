"""Secrets at rest: every secret Herald stores is sealed with AES-256-GCM under a key from
``HERALD_SECRET_KEYS`` -- a key ring whose first key seals and every key opens.

A sealed value is ``b"H1" + len(key id) + key id + nonce (12) + ciphertext and tag``: it names
the key that sealed it, so a ring can hold old keys while ``herald secrets rotate`` re-seals
under the new one. The associated data is the secret's *purpose* (``"endpoint-signing:ep_..."``):
a sealed value copied into another row, or another column's role, does not open there.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import secrets
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

_MAGIC = b"H1"
_NONCE_BYTES = 12
_KEY_BYTES = 32
_KEY_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
NEW_KEY_HINT = "generate one with `herald secrets new-key`"


class KeyRingError(ValueError):
    """HERALD_SECRET_KEYS is missing or malformed; the message says how, never echoing a key."""


class SealedValueError(Exception):
    """A stored value does not open: sealed under a key the ring lacks, for another purpose, or
    damaged. The message names the key id at most."""


@dataclass(frozen=True)
class KeyRing:
    # (id, AES-256 key), the sealing key first: never in a repr or a traceback.
    keys: tuple[tuple[str, bytes], ...] = field(repr=False)

    @classmethod
    def parse(cls, text: str) -> KeyRing:
        """``id:base64key[,id:base64key...]``, the newest first: it seals, all of them open."""
        keys: list[tuple[str, bytes]] = []
        for position, part in enumerate(p.strip() for p in text.split(",") if p.strip()):
            key_id, colon, encoded = part.partition(":")
            if not colon or not _KEY_ID.fullmatch(key_id):
                raise KeyRingError(
                    f"HERALD_SECRET_KEYS entry {position + 1} must be id:base64key, the id 1-64 "
                    f"letters, digits or ._- ({NEW_KEY_HINT})"
                )
            try:
                key = base64.urlsafe_b64decode(encoded.strip() + "=" * (-len(encoded) % 4))
            except (binascii.Error, ValueError):
                key = b""
            if len(key) != _KEY_BYTES:
                raise KeyRingError(
                    f"HERALD_SECRET_KEYS key {key_id!r} must be {_KEY_BYTES} bytes in base64 "
                    f"({NEW_KEY_HINT})"
                )
            if any(key_id == known for known, _ in keys):
                raise KeyRingError(f"HERALD_SECRET_KEYS names the key {key_id!r} twice")
            keys.append((key_id, key))
        if not keys:
            raise KeyRingError(f"HERALD_SECRET_KEYS holds no key ({NEW_KEY_HINT})")
        return cls(tuple(keys))

    @property
    def sealing_id(self) -> str:
        return self.keys[0][0]

    def seal(self, plaintext: str | bytes, purpose: str) -> bytes:
        data = plaintext.encode() if isinstance(plaintext, str) else plaintext
        key_id, key = self.keys[0]
        nonce = os.urandom(_NONCE_BYTES)
        sealed = AESGCM(key).encrypt(nonce, data, purpose.encode())
        return _MAGIC + bytes([len(key_id)]) + key_id.encode() + nonce + sealed

    def open(self, sealed: bytes, purpose: str) -> bytes:
        key_id, nonce, ciphertext = _parts(sealed)
        key = next((key for known, key in self.keys if known == key_id), None)
        if key is None:
            raise SealedValueError(
                f"a stored secret is sealed under the key {key_id!r}, which HERALD_SECRET_KEYS "
                "does not hold"
            )
        try:
            return AESGCM(key).decrypt(nonce, ciphertext, purpose.encode())
        except InvalidTag:
            raise SealedValueError(
                f"a stored secret does not open under the key {key_id!r} (damaged, or sealed "
                "for another row)"
            ) from None

    def open_text(self, sealed: bytes, purpose: str) -> str:
        return self.open(sealed, purpose).decode()

    def reseal(self, sealed: bytes, purpose: str) -> bytes | None:
        """The value sealed under the sealing key, or None when it already is."""
        if sealed_with(sealed) == self.sealing_id:
            return None
        return self.seal(self.open(sealed, purpose), purpose)


def _parts(sealed: bytes) -> tuple[str, bytes, bytes]:
    sealed = bytes(sealed)
    if len(sealed) < 3 or sealed[:2] != _MAGIC:
        raise SealedValueError("a stored secret is not a sealed value")
    end = 3 + sealed[2]
    key_id = sealed[3:end].decode("ascii", errors="replace")
    nonce = sealed[end : end + _NONCE_BYTES]
    if len(nonce) != _NONCE_BYTES:
        raise SealedValueError("a stored secret is truncated")
    return key_id, nonce, sealed[end + _NONCE_BYTES :]


def sealed_with(sealed: bytes) -> str:
    """The id of the key that sealed ``sealed``."""
    return _parts(sealed)[0]


def new_key(key_id: str) -> str:
    """A fresh ring entry, ``id:base64key``."""
    if not _KEY_ID.fullmatch(key_id):
        raise KeyRingError("a key id is 1-64 letters, digits or ._-")
    return f"{key_id}:{base64.urlsafe_b64encode(secrets.token_bytes(_KEY_BYTES)).decode()}"


class OpenedSecrets:
    """The worker's cache of opened secrets, keyed by the sealed bytes themselves: a rotation
    writes new bytes, so nothing here is ever stale, and an endpoint's secret is opened (and
    parsed) once per process rather than once per attempt. Bounded: the least recently used go
    first."""

    def __init__(self, ring: KeyRing, capacity: int = 10_000) -> None:
        self._ring = ring
        self._capacity = capacity
        self._opened: OrderedDict[tuple[bytes, str], Any] = OrderedDict()

    def open_parsed(self, sealed: bytes, purpose: str, parse: Callable[[str], Any]) -> Any:
        """``sealed`` opened and made into what ``parse`` makes of it, once per process."""
        entry = (bytes(sealed), purpose)
        found = self._opened.get(entry)
        if found is not None:
            self._opened.move_to_end(entry)
            return found
        opened = parse(self._ring.open_text(sealed, purpose))
        self._opened[entry] = opened
        if len(self._opened) > self._capacity:
            self._opened.popitem(last=False)
        return opened

    def open_text(self, sealed: bytes, purpose: str) -> str:
        opened: str = self.open_parsed(sealed, purpose, str)
        return opened

    def open_all(self, sealed: Sequence[bytes], purpose: str) -> list[str]:
        return [self.open_text(value, purpose) for value in sealed]

    def open_json(self, sealed: bytes, purpose: str) -> Mapping[str, Any]:
        """A sealed JSON object, parsed once: read it, never change it (it is shared)."""
        opened: Mapping[str, Any] = self.open_parsed(sealed, purpose, json.loads)
        return opened


def endpoint_purpose(endpoint_id: str, what: str) -> str:
    """What an endpoint's secret is sealed for -- ``signing`` (its Standard Webhooks secrets,
    current and previous), ``headers`` (its secret static headers) -- bound to its row."""
    return f"endpoint:{endpoint_id}:{what}"
