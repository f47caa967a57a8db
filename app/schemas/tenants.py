from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field


class TenantCreate(BaseModel):
    name: str = Field(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")


class TenantCreated(BaseModel):
    id: str
    name: str
    created_at: datetime
    api_key: str = Field(description="The tenant's first API key. Shown once; store it now.")
