"""Reading what a person typed into a console form as the API's body: a box whose text cannot
even be read as what it must hold is said for that box; the rest is held to the API's own
model, and every rule it breaks is said as the API says it."""

from __future__ import annotations

import json
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


class Unreadable(Exception):
    """What a form's boxes hold cannot be what they must; the message says which and why."""


def read_json(name: str, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise Unreadable(f"{name}: not JSON ({exc.msg}, line {exc.lineno})") from None


def validated(model: type[M], fields: dict[str, Any]) -> M:
    """``model`` of ``fields``, or ``Unreadable`` saying every rule it broke, as the API would."""
    try:
        return model.model_validate(fields)
    except ValidationError as exc:
        said = "; ".join(
            f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"
            for error in exc.errors()
        )
        raise Unreadable(said) from None
