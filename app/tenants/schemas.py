from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, Field

from app.schemas import ONE_LINE_RULE


class TenantCreate(BaseModel):
    name: Annotated[str, Field(min_length=1, max_length=200), ONE_LINE_RULE]


class TenantCreated(BaseModel):
    id: str
    name: str
    created_at: datetime
    api_key: str = Field(description="The tenant's first API key. Shown once; store it now.")
