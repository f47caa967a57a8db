"""docs/receivers.md's Python examples, run as written on a request Herald's own signing makes:
each accepts it, and refuses it once a byte of the body is changed. (Its Go, Java and TypeScript
examples are the same check in those languages; the TypeScript client's own tests cover
``verify()``.)"""

from __future__ import annotations

import re
from typing import Any

import pytest
from herald_client import InvalidSignature
from standardwebhooks import WebhookVerificationError

from app.endpoints.service.credentials import generate_secret
from app.endpoints.service.signing_keys import generate_key_pair, private_key
from app.engine.service.signing import signed_headers
from tests.fixtures.doc_examples import REPO

PAGE = (REPO / "docs" / "receivers.md").read_text()
PYTHON = re.findall(r"^```python\n(.*?)^```", PAGE, flags=re.M | re.S)
BODY = b'{"type":"order.paid","timestamp":"2026-12-06T01:25:00Z","data":{"order":42}}'


def signed() -> tuple[dict[str, str], str, str]:
    """Headers Herald would send for BODY, signed v1 and v1a; the secret and the public key."""
    secret, pair = generate_secret(), generate_key_pair()
    headers = signed_headers(
        "dlv_01JDOCS0000000000000000000", BODY, [secret], keys=[private_key(pair.private)]
    )
    return headers, secret, pair.public


def run(example: str, **names: Any) -> dict[str, Any]:
    scope = dict(names)
    exec(example, scope)  # noqa: S102  (the page's own example)
    return scope


def test_the_standardwebhooks_example_accepts_herald_and_refuses_a_change() -> None:
    [example] = [block for block in PYTHON if "from standardwebhooks import" in block]
    headers, secret, _ = signed()
    receive = run(example.replace("whsec_...", secret))["receive"]
    assert receive(headers, BODY)["data"] == {"order": 42}
    with pytest.raises(WebhookVerificationError):
        receive(headers, BODY.replace(b"42", b"43"))


@pytest.mark.parametrize("scheme", ["v1", "v1a"])
def test_the_clients_example_accepts_herald_and_refuses_a_change(scheme: str) -> None:
    [example] = [block for block in PYTHON if "from herald_client import" in block]
    headers, secret, public = signed()
    key = secret if scheme == "v1" else public
    example = example.replace('"whpk_..."', repr(key))
    assert run(example, headers=headers, body=BODY)["payload"]["data"] == {"order": 42}
    with pytest.raises(InvalidSignature):
        run(example, headers=headers, body=BODY.replace(b"42", b"43"))
