"""The sign-in form's token: issued by the server, good for an hour, echoed in a cookie.

The sign-in form has no session to tie a token to, so it carries one that a cookie only this
site sets (SameSite=Strict) must repeat: a form on another site cannot sign the browser in as
the attacker (login CSRF). Matching alone would accept any value someone managed to plant in
both places, so the token is also the server's own: ``{issued}.{nonce}.{mac}``, the MAC an
HMAC-SHA256 of the rest under a key kept in PostgreSQL (``console_secrets``). Every API process
reads the same key and the database's clock, so a form one process issued is good at any
other for exactly an hour, and a value made up elsewhere is good nowhere.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.console.repository import console_secrets
from app.core.sealing import KeyRing, SealedValueError

PURPOSE = "sign-in form"
LIFETIME_SECONDS = 3600


@dataclass(frozen=True)
class FormToken:
    value: str
    seconds_left: int  # for the cookie's Max-Age: it goes when the token does


def mint(secret: bytes, issued_at: int, nonce: str) -> str:
    return f"{issued_at}.{nonce}.{_mac(secret, issued_at, nonce)}"


def age_of(secret: bytes, token: str, now: int) -> int | None:
    """The token's age in seconds if this server issued it and it has not expired, else None."""
    issued, dot, rest = token.partition(".")
    nonce, dot2, mac = rest.partition(".")
    if not (dot and dot2 and issued.isascii() and issued.isdigit() and len(issued) <= 12):
        return None
    expected = _mac(secret, int(issued), nonce)
    if not hmac.compare_digest(mac.encode(), expected.encode()):
        return None
    age = now - int(issued)
    return age if 0 <= age < LIFETIME_SECONDS else None


def _mac(secret: bytes, issued_at: int, nonce: str) -> str:
    signed = f"{PURPOSE}|{issued_at}|{nonce}".encode()
    digest = hmac.new(secret, signed, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


async def form_token(
    sessionmaker: async_sessionmaker[AsyncSession], keys: KeyRing, held: str | None
) -> FormToken:
    """The token for a sign-in form: the one the browser already holds while it has more than
    half its hour left (a second sign-in tab must not make the first one's form stale), else a
    new one."""
    secret, now = await _signing_key(sessionmaker, keys)
    age = age_of(secret, held, now) if held else None
    if held and age is not None and age < LIFETIME_SECONDS // 2:
        return FormToken(held, LIFETIME_SECONDS - age)
    return FormToken(mint(secret, now, secrets.token_urlsafe(16)), LIFETIME_SECONDS)


async def accepts(
    sessionmaker: async_sessionmaker[AsyncSession],
    keys: KeyRing,
    sent: str | None,
    kept: str | None,
) -> bool:
    """Whether a posted sign-in form may sign in: its token is the one in this browser's cookie
    and one this server issued within the hour."""
    if not sent or not kept or not hmac.compare_digest(sent.encode(), kept.encode()):
        return False
    secret, now = await _signing_key(sessionmaker, keys)
    return age_of(secret, sent, now) is not None


async def _signing_key(
    sessionmaker: async_sessionmaker[AsyncSession], keys: KeyRing
) -> tuple[bytes, int]:
    """The key and the database's time. Read for every sign-in page and post (they are few),
    never kept in the process: a key replaced in the table holds at once everywhere. Sealed at
    rest under HERALD_SECRET_KEYS, like every secret Herald stores."""
    purpose = f"console:{PURPOSE}"  # as reseal() names it
    async with sessionmaker() as session, session.begin():
        found = await console_secrets.read(session, PURPOSE)
        if found is None:  # the first sign-in ever: make the key (or take a racing process's)
            sealed = keys.seal(secrets.token_bytes(32), purpose)
            await console_secrets.create(session, PURPOSE, sealed)
            found = await console_secrets.read(session, PURPOSE)
    assert found is not None
    sealed, now = found
    return keys.open(sealed, purpose), now


async def reseal(session: AsyncSession, keys: KeyRing) -> tuple[int, list[str]]:
    """The console's keys re-sealed under the ring's sealing key (``herald secrets rotate``):
    how many, and the purposes of those that do not open (left as they are)."""
    resealed, unopened = 0, []
    for purpose, sealed in await console_secrets.all_sealed(session):
        try:
            fresh = keys.reseal(sealed, f"console:{purpose}")
        except SealedValueError:
            unopened.append(purpose)
            continue
        if fresh is not None:
            await console_secrets.replace(session, purpose, was=sealed, now=fresh)
            resealed += 1
    return resealed, unopened
