"""What an endpoint signs with and authenticates by: its signature schemes, and OAuth2 client
credentials (the secret written, never read back)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints
from pydantic_core import PydanticCustomError

from app.core.fields import TextRule
from app.core.proxies import EgressProxy

URL_RULE = TextRule(
    r"^[^\x00-\x20\x7f]+$",
    "must be an absolute http(s) URL without spaces or control characters (encode a space as %20)",
)
# An endpoint's URL, and its token endpoint's: both pass the SSRF guard when saved.
EndpointUrl = Annotated[str, StringConstraints(min_length=1, max_length=2048), URL_RULE]

SignatureScheme = Literal["v1", "v1a"]


def _once_each(schemes: list[str]) -> list[str]:
    if len(set(schemes)) != len(schemes):
        raise PydanticCustomError("schemes", "give each scheme once")
    return schemes


def v1_only() -> list[SignatureScheme]:
    return ["v1"]


SignatureSchemes = Annotated[list[SignatureScheme], Field(min_length=1), AfterValidator(_once_each)]
SIGNATURE_SCHEMES_DOC = (
    "The Standard Webhooks signatures every attempt carries in `webhook-signature`: `v1` "
    "(HMAC-SHA256 with the endpoint's secret), `v1a` (ed25519: the receiver verifies with "
    "`public_key` and holds nothing secret), or both."
)


# What OAuth2 may send: no control characters (each is form-encoded on the way).
_OAUTH_TEXT = TextRule(r"^[^\x00-\x1f\x7f]*$", "must be text without control characters")
OAuthText = Annotated[str, StringConstraints(max_length=1000), _OAUTH_TEXT]


class OAuth2Spec(BaseModel):
    """OAuth2 client credentials (RFC 6749 4.4): Herald fetches a token from ``token_url`` and
    sends it as ``Authorization: Bearer`` on every attempt."""

    model_config = ConfigDict(extra="forbid")

    token_url: EndpointUrl = Field(
        description="The token endpoint; it passes the same SSRF guard as the endpoint's URL."
    )
    client_id: Annotated[OAuthText, StringConstraints(min_length=1, max_length=255)]
    client_secret: Annotated[OAuthText, StringConstraints(min_length=1)] = Field(
        description="Sent to the token endpoint only (HTTP Basic); sealed at rest, never shown."
    )
    scope: OAuthText | None = None
    audience: OAuthText | None = Field(
        default=None, description="Sent as `audience` (Auth0, Okta and others ask for it)."
    )


def _a_proxy(url: str) -> str:
    try:
        EgressProxy.parse(url, trusted=False)
    except ValueError as exc:
        raise PydanticCustomError("proxy", str(exc)) from None
    return url


class EgressProxySpec(BaseModel):
    """The endpoint's own egress proxy, in place of the operator's: for a receiver that
    accepts traffic only from a proxy of the tenant's."""

    model_config = ConfigDict(extra="forbid")

    url: Annotated[EndpointUrl, AfterValidator(_a_proxy)] = Field(
        description="`http://[user:password@]host:port`; it passes the SSRF guard as the "
        "endpoint's URL does, and its credentials are sealed at rest and never shown.",
        repr=False,
    )


class EgressProxyOut(BaseModel):
    url: str = Field(description="The proxy, less its credentials.")
    credentials: bool = Field(description="Whether it is given a user and password.")


class OAuth2Out(BaseModel):
    token_url: str
    client_id: str
    scope: str | None
    audience: str | None
