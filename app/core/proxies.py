"""An egress proxy's address and credentials, as the operator (HERALD_EGRESS_PROXY) or an
endpoint (its ``egress_proxy``) gives them: parsed once, the credentials kept out of sight.
How a request goes through one is app/engine/service/egress.py's."""

from __future__ import annotations

from dataclasses import dataclass, field

import aiohttp
from yarl import URL


@dataclass(frozen=True)
class EgressProxy:
    url: str  # http://host:port, without credentials
    # Proxy-Authorization, when the URL carried credentials: never in a repr or a traceback.
    headers: dict[str, str] = field(repr=False)
    # The operator's (HERALD_EGRESS_PROXY): reached wherever it is, its failures Herald's own.
    # Not trusted, an endpoint's: its address passes the SSRF guard as a receiver's does, and
    # its failures count against the endpoint.
    trusted: bool = True

    @classmethod
    def parse(cls, text: str, *, trusted: bool) -> EgressProxy:
        """``http://[user:password@]host:port``; raises ValueError, naming no credential."""
        try:
            parsed = URL(text)
        except ValueError:
            raise ValueError("the egress proxy is not a URL") from None
        # One "@" at most: `http://u:p@h:1@evil` parses, surprisingly, as the proxy evil.
        if (
            parsed.scheme != "http"
            or not parsed.host
            or parsed.path not in ("", "/")
            or text.count("@") > 1
        ):
            raise ValueError("an egress proxy is http://[user:password@]host:port")
        headers = {}
        if parsed.user is not None:
            credentials = aiohttp.encode_basic_auth(parsed.user, parsed.password or "")
            headers["Proxy-Authorization"] = credentials
        return cls(str(parsed.with_user(None).with_path("")), headers, trusted)

    @property
    def host(self) -> str:
        return URL(self.url).host or ""
