from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints
from pydantic_core import PydanticCustomError

from app.core.fields import PRINTABLE_RULE, STORABLE_JSON, TenantEventType
from app.programs import payload_schemas


def _compiles(schema: dict[str, Any]) -> dict[str, Any]:
    try:
        payload_schemas.compile_schema(schema)
    except payload_schemas.SchemaError as exc:
        # Braces would be read as the message's placeholders.
        said = str(exc).replace("{", "(").replace("}", ")")
        raise PydanticCustomError("json_schema", said) from None
    return schema


# Storable first: the compiler's messages would quote what PostgreSQL refuses.
PayloadSchema = Annotated[dict[str, Any], STORABLE_JSON, AfterValidator(_compiles)]
Description = Annotated[str, StringConstraints(max_length=1000), PRINTABLE_RULE]
_SCHEMA = (
    "A JSON Schema (Draft 2020-12 unless its $schema says otherwise) that every payload of this "
    "type must match when accepted; a payload that does not is refused with 422 naming the "
    "JSON pointer that fails. $ref must stay inside the schema."
)
_EXAMPLE = (
    "A payload of this type, as a test event carries it and as the portal shows it to a "
    "customer choosing a type; it must match the schema."
)
Example = Annotated[dict[str, Any], STORABLE_JSON]


class EventTypeCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "name": "order.paid",
                    "description": "An order was paid in full.",
                    "schema": {
                        "type": "object",
                        "required": ["order_id", "amount"],
                        "properties": {
                            "order_id": {"type": "string"},
                            "amount": {"type": "integer", "minimum": 0},
                        },
                    },
                    "example": {"order_id": "o_77", "amount": 1999},
                }
            ]
        },
    )

    name: TenantEventType
    description: Description | None = None
    schema_: PayloadSchema | None = Field(default=None, alias="schema", description=_SCHEMA)
    example: Example | None = Field(default=None, description=_EXAMPLE)


class EventTypeUpdate(BaseModel):
    """Fields to change; fields left out stay as they are; a null schema or example removes
    it."""

    model_config = ConfigDict(extra="forbid")

    description: Description | None = None
    schema_: PayloadSchema | None = Field(default=None, alias="schema", description=_SCHEMA)
    example: Example | None = Field(default=None, description=_EXAMPLE)


class EventTypeOut(BaseModel):
    model_config = ConfigDict(from_attributes=True, populate_by_name=True)

    name: str
    description: str | None
    schema_: dict[str, Any] | None = Field(validation_alias="schema", serialization_alias="schema")
    example: dict[str, Any] | None = Field(description=_EXAMPLE)
    version: int = Field(description="Counts the schema's changes, from 1.")
    created_at: datetime
    updated_at: datetime
