"""The console's endpoint form, read as the API's body would be: every option the API has, as
text a person types, turned into the fields of ``EndpointCreate`` or ``EndpointUpdate`` -- which
then hold it to the API's own rules. What cannot even be read (JSON that is not JSON, a number
that is not a number) is said for the box it is in.

The credentials (secret headers, OAuth2, TLS, the endpoint's own proxy) are never shown back:
on a change, a box left empty keeps what is set, and ``null`` removes it."""

from __future__ import annotations

from typing import Any

from app.console.service.form_reading import Unreadable, read_json

TEXT = (
    "url",
    "description",
    "filter",
    "transformation",
    "payload_format",
    "ordering",
    "on_dead",
)
CREDENTIALS = ("secret_headers", "oauth2", "tls", "egress_proxy")
CHOICES = {
    "payload_format": ("raw", "standard", "cloudevents", "cloudevents-binary"),
    "ordering": ("none", "endpoint", "key"),
    "on_dead": ("halt", "skip"),
}


def _number(form: dict[str, str], name: str, kind: type[int] | type[float]) -> Any:
    text = form.get(name, "").strip()
    if not text:
        return None
    try:
        return kind(text)
    except ValueError:
        raise Unreadable(f"{name}: must be a number, not {text}") from None


def _statuses(text: str) -> list[int]:
    try:
        return [int(part) for part in text.replace(",", " ").split()]
    except ValueError:
        raise Unreadable("final_statuses: HTTP statuses, separated by commas") from None


def fields_of(form: dict[str, str], *, creating: bool) -> dict[str, Any]:
    """The body the form stands for. Making an endpoint, every box counts; changing one, a
    credential box left empty is left out (kept as it is)."""
    fields: dict[str, Any] = {name: form.get(name, "").strip() or None for name in TEXT}
    for name in CHOICES:  # a choice not sent is left to the API: its default, or as it is
        if fields[name] is None:
            del fields[name]
    types = form.get("event_types", "").replace(",", " ").split()
    fields["event_types"] = types or None
    fields["rate_limit_per_second"] = _number(form, "rate_limit_per_second", float)
    fields["max_in_flight"] = _number(form, "max_in_flight", int)
    fields["enabled"] = form.get("enabled") == "on"
    fields["webhook_handshake"] = form.get("webhook_handshake") == "on"
    fields["signature_schemes"] = [s for s in ("v1", "v1a") if form.get(f"scheme_{s}") == "on"]
    fields["final_statuses"] = _statuses(form.get("final_statuses", ""))
    fields["headers"] = (
        read_json("headers", form["headers"]) if form.get("headers", "").strip() else {}
    )
    for name in CREDENTIALS:
        if form.get(name, "").strip():
            fields[name] = read_json(name, form[name])
        elif creating:
            fields[name] = {} if name == "secret_headers" else None
    if creating:
        fields["customer_id"] = form.get("customer_id", "").strip() or None
        fields["delivery"] = "poll" if form.get("delivery") == "poll" else "push"
    return fields


def changed_fields(fields: dict[str, Any], current: dict[str, Any]) -> dict[str, Any]:
    """What a change sends: the fields whose value differs from the endpoint's now (a
    credential typed in counts as changed: its value is never shown to compare)."""
    return {
        name: value
        for name, value in fields.items()
        if name in CREDENTIALS or name not in current or current[name] != value
    }
