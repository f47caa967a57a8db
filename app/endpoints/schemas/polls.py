"""A polling endpoint's reads and acknowledgements, as the API takes and answers them."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

from app.core.ids import looks_like

_TOKEN = re.compile(r"[0-9a-f]{32}")
EXAMPLE_RECEIPT = "dlv_01JF3Q6W9ZKTR8V4M2N5PXC7BD.0123456789abcdef0123456789abcdef"


def _a_receipt(value: str) -> str:
    """ "<delivery id>.<lease token, 32 hex digits>": a receipt as a poll answers it."""
    delivery_id, _, token = value.rpartition(".")
    if not looks_like("dlv", delivery_id) or _TOKEN.fullmatch(token) is None:
        raise PydanticCustomError(
            "receipt", "is not a receipt: send each receipt as a poll answered it"
        )
    return value


Receipt = Annotated[str, Field(max_length=100), AfterValidator(_a_receipt)]


class PolledDeliveryOut(BaseModel):
    id: str = Field(description="The delivery's id: the same on every read, and `webhook-id`.")
    receipt: str = Field(
        description="What acknowledges this read (POST .../poll/ack): it holds until "
        "`visible_again_at`, and no other read's receipt acknowledges it."
    )
    event_id: str
    event_type: str
    reads: int = Field(description="How many times it has been read, this read included.")
    visible_again_at: datetime = Field(
        description="Unless acknowledged by then, the next poll reads it again, under the same id."
    )
    body: str = Field(
        description="The request body a push would have sent, exactly the bytes its signature "
        "covers (as text): verify `headers` against it before parsing it."
    )
    headers: dict[str, str] = Field(
        description="The headers a push would have sent: `webhook-id`, `webhook-timestamp`, "
        "`webhook-signature` (Standard Webhooks), `Content-Type`, `Herald-Event-Type`..."
    )


class PollPage(BaseModel):
    data: list[PolledDeliveryOut] = Field(
        description="Oldest due first; empty when nothing was due (after `wait` seconds). An "
        "ordered endpoint answers each stream's next delivery only once the one before it is "
        "acknowledged."
    )


class PollAck(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"receipts": [EXAMPLE_RECEIPT]}]},
    )

    receipts: list[Receipt] = Field(
        min_length=1, max_length=500, description="The receipts of what was processed."
    )


class PollAckOut(BaseModel):
    acknowledged: list[str] = Field(
        description="Delivery ids now succeeded, each with its read as its attempt (or that "
        "had succeeded already)."
    )
    expired: list[str] = Field(
        description="Delivery ids whose receipt no longer holds -- its visibility ended, and a "
        "later read has it or will: process it again when it comes back, under the same id."
    )
