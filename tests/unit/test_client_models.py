"""The client's models (clients/python/herald_client/models.py) match Herald's committed OpenAPI
document field for field, required for required: neither can drift from the other."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from herald_client.models import OPENAPI_NAMES
from pydantic import BaseModel

OPENAPI = json.loads((Path(__file__).resolve().parents[2] / "openapi/openapi.json").read_text())
SCHEMAS = OPENAPI["components"]["schemas"]


@pytest.mark.parametrize("model", list(OPENAPI_NAMES), ids=lambda m: m.__name__)
def test_a_client_model_has_the_fields_of_its_openapi_schema(model: type[BaseModel]) -> None:
    schema = SCHEMAS[OPENAPI_NAMES[model]]
    assert set(model.model_fields) == set(schema["properties"])
    required = {name for name, field in model.model_fields.items() if field.is_required()}
    assert required == set(schema.get("required", []))


def test_every_answer_the_client_reads_has_a_model() -> None:
    # The answers of the routes the client calls, by schema name.
    read = {
        "DeliveryOut",
        "DeliveryDetail",
        "AttemptOut",
        "EventAccepted",
        "EventOut",
        "EndpointOut",
        "EndpointCreated",
        "RedriveJobOut",
        "PortalSessionOut",
        "SessionsRevoked",
        "LimitsOut",
    }
    assert read <= set(OPENAPI_NAMES.values())
