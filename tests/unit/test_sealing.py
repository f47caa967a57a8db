"""The key ring (app/core/sealing.py): what seals opens only under its own key and for its own
purpose, a malformed HERALD_SECRET_KEYS is refused in words that name no key, and the worker's
cache opens a value once."""

from __future__ import annotations

import base64
import secrets

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from app.core.config import SettingsError, load_settings
from app.core.sealing import (
    KeyRing,
    KeyRingError,
    OpenedSecrets,
    SealedValueError,
    new_key,
    sealed_with,
)

OLD, NEW = new_key("old"), new_key("new")


def test_the_first_key_seals_and_every_key_opens() -> None:
    before = KeyRing.parse(OLD).seal("whsec_one", "endpoint:ep_1:signing")
    ring = KeyRing.parse(f"{NEW}, {OLD}")
    after = ring.seal("whsec_two", "endpoint:ep_1:signing")
    assert (sealed_with(before), sealed_with(after)) == ("old", "new")
    assert ring.open_text(before, "endpoint:ep_1:signing") == "whsec_one"
    assert ring.open_text(after, "endpoint:ep_1:signing") == "whsec_two"
    resealed = ring.reseal(before, "endpoint:ep_1:signing")
    assert resealed is not None and sealed_with(resealed) == "new"
    assert ring.reseal(after, "endpoint:ep_1:signing") is None  # already under the new key


def test_a_sealed_value_is_aes_gcm_any_implementation_opens_with_the_key() -> None:
    """The format is documented (app/core/sealing.py): AES-256-GCM, the purpose as associated data,
    so an operator holding the key can read a value without Herald."""
    sealed = KeyRing.parse(NEW).seal("whsec_x", "endpoint:ep_2:signing")
    key = base64.urlsafe_b64decode(NEW.split(":", 1)[1])
    end = 3 + sealed[2]
    nonce, ciphertext = sealed[end : end + 12], sealed[end + 12 :]
    assert AESGCM(key).decrypt(nonce, ciphertext, b"endpoint:ep_2:signing") == b"whsec_x"
    assert b"whsec_x" not in sealed
    assert sealed != KeyRing.parse(NEW).seal("whsec_x", "endpoint:ep_2:signing")  # fresh nonce


def test_a_value_opens_only_for_its_purpose_under_a_key_the_ring_holds() -> None:
    ring = KeyRing.parse(NEW)
    sealed = ring.seal("whsec_x", "endpoint:ep_1:signing")
    with pytest.raises(SealedValueError, match="sealed for another row"):
        ring.open(sealed, "endpoint:ep_2:signing")  # copied into another endpoint's row
    with pytest.raises(SealedValueError, match="the key 'new', which HERALD_SECRET_KEYS"):
        KeyRing.parse(OLD).open(sealed, "endpoint:ep_1:signing")
    damaged = sealed[:-1] + bytes([sealed[-1] ^ 1])
    with pytest.raises(SealedValueError, match="damaged"):
        ring.open(damaged, "endpoint:ep_1:signing")
    with pytest.raises(SealedValueError, match="not a sealed value"):
        ring.open(b"whsec_plain", "endpoint:ep_1:signing")


@pytest.mark.parametrize(
    ("setting", "says"),
    [
        ("", "holds no key"),
        ("nocolon", "must be id:base64key"),
        ("bad id:" + base64.urlsafe_b64encode(bytes(32)).decode(), "must be id:base64key"),
        ("short:" + base64.urlsafe_b64encode(b"sixteen bytes!!!").decode(), "must be 32 bytes"),
        ("k:not base64 at all", "must be 32 bytes"),
        (f"{NEW},{NEW}", "names the key 'new' twice"),
    ],
)
def test_a_malformed_key_ring_is_refused_naming_no_key(setting: str, says: str) -> None:
    with pytest.raises(KeyRingError, match=says) as refused:
        KeyRing.parse(setting)
    for key in (NEW.split(":", 1)[1], "sixteen bytes", "not base64"):
        assert key not in str(refused.value)


def test_settings_refuse_a_malformed_ring_at_start_and_say_how_to_make_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HERALD_SECRET_KEYS", "k:" + secrets.token_urlsafe(8))
    with pytest.raises(SettingsError, match=r"HERALD_SECRET_KEYS: .* must be 32 bytes"):
        load_settings()
    monkeypatch.delenv("HERALD_SECRET_KEYS")
    with pytest.raises(KeyRingError, match="herald secrets new-key"):
        load_settings().key_ring()
    monkeypatch.setenv("HERALD_SECRET_KEYS", NEW)
    settings = load_settings()
    assert settings.key_ring().sealing_id == "new"
    assert NEW.split(":", 1)[1] not in repr(settings)


def test_the_workers_cache_opens_each_value_once_and_forgets_the_oldest() -> None:
    ring = KeyRing.parse(NEW)
    opened = OpenedSecrets(ring, capacity=2)
    values = [ring.seal(f"whsec_{n}", f"endpoint:ep_{n}:signing") for n in range(3)]
    assert opened.open_text(values[0], "endpoint:ep_0:signing") == "whsec_0"
    assert opened.open_text(values[0], "endpoint:ep_0:signing") == "whsec_0"
    assert len(opened._opened) == 1
    for n in (1, 2):
        opened.open_text(values[n], f"endpoint:ep_{n}:signing")
    assert len(opened._opened) == 2 and (values[0], "endpoint:ep_0:signing") not in opened._opened
    with pytest.raises(SealedValueError):  # the purpose is part of the cache's key
        opened.open_text(values[1], "endpoint:ep_0:signing")
