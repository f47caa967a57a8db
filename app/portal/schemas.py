from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.core.fields import ONE_LINE_RULE, CustomerId, KeyId, TextRule

Capability = Literal["manage_endpoints", "replay", "transform_endpoints", "poll_endpoints"]
# How long a session may last, and how long its link may wait to be opened (minutes: the
# tenant's page mints it just before it shows the iframe).
LIFETIME_DEFAULT, LIFETIME_MIN, LIFETIME_MAX = 3600, 60, 86_400
LINK_SECONDS = 600


class PortalSessionCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"customer_id": "cus_42", "capabilities": ["manage_endpoints"]}]
        },
    )

    customer_id: CustomerId
    lifetime_seconds: int = Field(
        default=LIFETIME_DEFAULT,
        ge=LIFETIME_MIN,
        le=LIFETIME_MAX,
        description="How long the session lasts once minted; its link must be opened within "
        f"{LINK_SECONDS // 60} minutes (or the lifetime, if shorter).",
    )
    capabilities: list[Capability] = Field(
        default=[],
        max_length=4,
        description="What the customer may do besides reading its endpoints, deliveries and "
        "the catalogue: `manage_endpoints` (create, change, enable/disable, delete, see and "
        "rotate secrets, send test events), `replay` (send deliveries again), "
        "`transform_endpoints` (with `manage_endpoints`: set and try its endpoints' "
        "transformations), `poll_endpoints` (read its polling endpoints' deliveries and "
        "acknowledge them: a read hides them from its receiver's own polls meanwhile). Empty: "
        "read-only.",
    )


class PortalSessionCreated(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    customer_id: str
    capabilities: list[str]
    url: str = Field(
        description="Open it once, in an iframe or a new tab: the portal, its one-time token "
        "in the URL's fragment (which browsers never send to a server, so no log holds it)."
    )
    link_expires_at: datetime = Field(description="The link must be opened before this.")
    expires_at: datetime = Field(description="The session ends then.")


# scheme://host[:port], the form a browser's Origin header has: what CSP frame-ancestors lists.
ORIGIN_RULE = TextRule(
    r"^https?://[A-Za-z0-9.-]{1,253}(:[0-9]{1,5})?$",
    "must be an origin: http:// or https://, a host name or IPv4 address, and an optional "
    ":port -- no path, no trailing slash",
)
Origin = Annotated[str, ORIGIN_RULE]
ACCENT_RULE = TextRule(r"^#[0-9a-fA-F]{6}$", "must be a colour as #rrggbb")
LOGO_RULE = TextRule(
    r"^https?://[A-Za-z0-9.-]{1,253}(:[0-9]{1,5})?/[\x21-\x7e]{0,1000}$",
    "must be an http:// or https:// URL of at most 1,000 visible characters",
)


# Bounded again by the body limit (HERALD_MAX_PAYLOAD_BYTES), so the check says it in words.
LOGO_MAX_BYTES = 64 * 1024


class PortalSettingsPut(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "name": "Acme webhooks",
                    "logo_url": "https://app.acme.test/logo.svg",
                    "accent_color": "#0b5fff",
                    "allowed_origins": ["https://app.acme.test"],
                }
            ]
        },
    )

    name: Annotated[str, Field(min_length=1, max_length=100), ONE_LINE_RULE] | None = Field(
        default=None, description="Shown at the top of the portal (default: the tenant's name)."
    )
    logo_url: Annotated[str, LOGO_RULE] | None = Field(
        default=None,
        description="An image on one of `allowed_origins` (the portal's CSP allows images "
        "from those origins alone; an https portal shows only an https logo).",
    )
    logo_upload: str | None = Field(
        default=None,
        description="Or upload it: a data URL (`data:image/png;base64,...`; PNG, JPEG or WebP, "
        f"at most {LOGO_MAX_BYTES // 1024} KiB), served by Herald itself. Not with `logo_url`.",
    )
    accent_color: Annotated[str, ACCENT_RULE] | None = None
    allowed_origins: list[Origin] = Field(
        default=[],
        max_length=20,
        description="The origins whose pages may embed the portal in an iframe (its CSP "
        "frame-ancestors). Empty: no page may frame it; a link still opens it in a tab.",
    )


class PortalSettingsPatch(BaseModel):
    """Fields to change: one left out stays as it is, null clears it (the default again)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"name": "Acme Hooks"}, {"logo_upload": None}]},
    )

    name: Annotated[str, Field(min_length=1, max_length=100), ONE_LINE_RULE] | None = Field(
        default=None, description="null: the tenant's name."
    )
    logo_url: Annotated[str, LOGO_RULE] | None = Field(
        default=None,
        description="An image on one of `allowed_origins`; replaces an uploaded logo. null: "
        "no logo by URL.",
    )
    logo_upload: str | None = Field(
        default=None,
        description="An uploaded logo (a data URL, as for PUT); replaces `logo_url`. null "
        "removes the uploaded logo.",
    )
    accent_color: Annotated[str, ACCENT_RULE] | None = Field(
        default=None, description="null: the default colour."
    )
    allowed_origins: list[Origin] | None = Field(
        default=None, max_length=20, description="Replaces the list; null empties it."
    )


class PortalSettingsOut(BaseModel):
    name: str | None
    logo_url: str | None
    logo_uploaded: bool = Field(description="A logo was uploaded (served by Herald).")
    accent_color: str | None
    allowed_origins: list[str]
    updated_at: datetime | None


SessionStatus = Literal["unopened", "open", "ended", "revoked"]


class PortalSessionOut(BaseModel):
    id: str
    customer_id: str
    capabilities: list[str]
    api_key_id: str | None = Field(
        description="The key that minted it: revoking that key ends the session."
    )
    status: SessionStatus = Field(
        description="`unopened` (its link not used yet), `open`, `ended` (expired, or its link "
        "expired unused) or `revoked` (by the tenant, or with its key)."
    )
    created_at: datetime
    link_expires_at: datetime
    opened_at: datetime | None
    expires_at: datetime
    revoked_at: datetime | None


class PortalSessionsRevoke(BaseModel):
    """Which sessions to end: a customer's, a key's, or a key's for one customer."""

    model_config = ConfigDict(extra="forbid")

    customer_id: CustomerId | None = None
    api_key_id: KeyId | None = None

    @model_validator(mode="after")
    def _names_some(self) -> PortalSessionsRevoke:
        if self.customer_id is None and self.api_key_id is None:
            raise ValueError("name customer_id, api_key_id or both: whose sessions to end")
        return self


class SessionsRevoked(BaseModel):
    revoked: int = Field(description="How many running sessions this ended.")
