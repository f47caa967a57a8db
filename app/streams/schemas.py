"""What the API says of a stream (GET /v1/endpoints/{id}/streams)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field


class StreamOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    ordering_key: str | None = Field(
        description="The stream's ordering key; null for the endpoint's one stream (ordering "
        "`endpoint`) or its deliveries without a key (ordering `key`)."
    )
    last_seq: int = Field(description="The highest sequence number the stream has handed out.")
    head_id: str = Field(description="The delivery the stream waits on.")
    head_seq: int | None = Field(description="The head's number in the stream.")
    head_state: str | None = Field(description="The head's state; `dead` when it halts it.")
    head_since: datetime | None = Field(description="Since when the head has been the head.")
    halted_at: datetime | None = Field(
        description="When the stream halted on its dead head (on_dead `halt`); null while it "
        "flows. An operator redrives or skips the head to move it on."
    )
    live: int = Field(
        description="Deliveries of the stream not yet finished (the head among them while "
        "it lives): the stream's depth."
    )
