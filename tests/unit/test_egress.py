"""HERALD_EGRESS_PROXY as read (app/engine/service/egress.py): credentials out of the URL and
into Proxy-Authorization, anything but an HTTP proxy refused without echoing it."""

from __future__ import annotations

import base64

import pytest

from app.core.config import SettingsError, load_settings
from app.core.proxies import EgressProxy


def test_credentials_leave_the_url_for_the_proxy_authorization_header() -> None:
    proxy = EgressProxy.parse("http://herald:p%40ss@proxy.internal:3128", trusted=True)
    assert proxy.url == "http://proxy.internal:3128"
    assert proxy.host == "proxy.internal"
    scheme, _, encoded = proxy.headers["Proxy-Authorization"].partition(" ")
    assert (scheme, base64.b64decode(encoded)) == ("Basic", b"herald:p@ss")
    assert EgressProxy.parse("http://proxy.internal:3128", trusted=True).headers == {}


@pytest.mark.parametrize(
    "setting", ["https://proxy:3128", "socks5://proxy:1080", "http://proxy:3128/path", "proxy"]
)
def test_anything_but_an_http_proxy_is_refused_at_start(
    setting: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HERALD_EGRESS_PROXY", setting.replace("proxy", "user:hunter2@proxy", 1))
    with pytest.raises(SettingsError, match=r"HERALD_EGRESS_PROXY: .*http://") as refused:
        load_settings()
    assert "hunter2" not in str(refused.value)
