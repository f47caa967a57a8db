"""An endpoint's TLS material for mutual TLS, as written (the key never read back) and as shown:
what identifies the certificates, none of it secret."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, StringConstraints, model_validator
from pydantic_core import PydanticCustomError

from app.core import certificates

TLS_DOC = (
    "Mutual TLS and the receiver's own CA: `client_certificate` (PEM, the leaf first, then any "
    "intermediates) and `client_key` (PEM, unencrypted; sealed at rest, never shown) are "
    "presented on every attempt; `ca_bundle` (PEM) is the only trust for the receiver's "
    "certificate when given. Checked when saved: parseable, the key the certificate's, not "
    "expired, for client authentication. https URLs only."
)


# Bounded before anything parses them (app/core/certificates.py bounds them again, in bytes).
ChainPem = Annotated[str, StringConstraints(min_length=1, max_length=certificates.MAX_CHAIN_BYTES)]
KeyPem = Annotated[str, StringConstraints(min_length=1, max_length=certificates.MAX_KEY_BYTES)]
BundlePem = Annotated[
    str, StringConstraints(min_length=1, max_length=certificates.MAX_BUNDLE_BYTES)
]


class ClientTLSSpec(BaseModel):
    """TLS material for one endpoint, checked as a whole when the model is made."""

    model_config = ConfigDict(extra="forbid")

    client_certificate: ChainPem | None = None
    client_key: KeyPem | None = Field(
        default=None, description="Sealed at rest and never shown again.", repr=False
    )
    ca_bundle: BundlePem | None = None
    overlap_hours: float = Field(
        default=24,
        ge=0,
        le=720,
        description="When this replaces TLS material already set: for so long, an attempt whose "
        "connection the receiver refuses with the new material is sent once more, at once, "
        "with the previous (so the receiver may trust the new certificate after the switch).",
    )
    _checked: certificates.Checked | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _check(self) -> ClientTLSSpec:
        try:
            self._checked = certificates.check(self.material())
        except certificates.CertificateError as exc:
            raise PydanticCustomError("tls", str(exc)) from None
        return self

    def material(self) -> certificates.ClientTLS:
        return certificates.ClientTLS(self.client_certificate, self.client_key, self.ca_bundle)

    @property
    def checked(self) -> certificates.Checked:
        assert self._checked is not None  # set by the validator that made self
        return self._checked


class CertificateOut(BaseModel):
    subject: str
    issuer: str
    serial_number: str = Field(description="hexadecimal")
    not_before: datetime
    not_after: datetime
    sha256_fingerprint: str = Field(description="SHA-256 of the DER certificate, hexadecimal")


class CABundleOut(BaseModel):
    certificates: int
    subjects: list[str]


class ClientTLSOut(BaseModel):
    client_certificate: CertificateOut | None = Field(
        description="The certificate presented (its key is never shown)."
    )
    ca_bundle: CABundleOut | None = Field(
        description="The CAs the receiver's certificate is checked against; null: the system's."
    )
    previous_client_certificate: CertificateOut | None = Field(
        description="After a replacement, until `previous_expires_at`: the certificate an "
        "attempt falls back to when the receiver refuses the connection with the new one."
    )
    previous_expires_at: datetime | None


def shown(
    facts: dict[str, Any] | None, previous: dict[str, Any] | None, expires: datetime | None
) -> dict[str, Any] | None:
    """``ClientTLSOut``'s fields from an endpoint row's columns (None: no TLS material); the
    previous material only while it is still a fallback."""
    if facts is None:
        return None
    if previous is None or expires is None or expires <= datetime.now(UTC):
        previous, expires = None, None
    return {
        "client_certificate": facts.get("client_certificate"),
        "ca_bundle": facts.get("ca_bundle"),
        "previous_client_certificate": (previous or {}).get("client_certificate"),
        "previous_expires_at": expires,
    }
