"""Herald's Python client: ``Herald`` and ``AsyncHerald`` for producers, ``verify`` for
receivers."""

from herald_client.client import AsyncHerald, Herald
from herald_client.errors import HeraldError, InvalidSignature
from herald_client.receiving import verify

__all__ = ["AsyncHerald", "Herald", "HeraldError", "InvalidSignature", "verify"]
