"""Where a payload fails its schema, found cheaply: the first violation, in words.

The validator's own error report builds every error of every branch (an ``anyOf`` keeps all
its branches' errors), which is what made one 1 KB schema take 15 s to explain ``{}``. This
looks for one violation instead, top down, with validators for parts of the schema that refer
back into it (a registry holds the schema under ``urn:herald:schema``): a node's own rules first
(a validator of just those has no branches to explain), then each subschema it applies, in
place (``$ref``, ``allOf``) or one property or element down, stopping at the first that fails.
A branching rule that fails (``anyOf``, ``oneOf``, ``not``, ``if``) is named, not explained.

Each step checks part of the payload against part of the schema, which costs no more than the
whole check's bound; the search may make as many steps as fit in one evaluation's budget
(``STEPS_PER_EVALUATION`` over that bound), and when they run out the answer says the payload
fails without saying where.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema_rs

from app.programs.budget import STEPS_PER_EVALUATION
from app.programs.payload_schema_cost import escape, ref_pointer, resolve
from app.programs.payload_schemas import CompiledSchema, validator

HOME = "urn:herald:schema"
# The applicators, in the order they are looked into: in place, then one level down, then
# those only named. ``then``/``else`` go with ``if``; the unevaluated ones, which depend on
# every sibling, are named when nothing else failed.
_ORDER = (
    *("$ref", "allOf", "properties", "patternProperties", "additionalProperties"),
    *("prefixItems", "items", "additionalItems", "contains", "propertyNames"),
    *("anyOf", "oneOf", "not", "if", "dependentSchemas", "dependencies"),
)
_LAST = ("unevaluatedProperties", "unevaluatedItems")
_APPLICATORS = (*_ORDER, *_LAST, "then", "else", "$defs", "definitions")
# What a keyword's verdict depends on besides itself.
_SIBLINGS = {
    "if": ("then", "else"),
    "additionalProperties": ("properties", "patternProperties"),
    "additionalItems": ("items",),
    "items": ("prefixItems",),
}


def first_violation(compiled: CompiledSchema, payload: Any, payload_bytes: int) -> str:
    """Where and how ``payload`` (which failed ``compiled``) fails, in words."""
    checks = STEPS_PER_EVALUATION // compiled.cost.at(payload_bytes)
    try:
        return _Search(compiled, checks).locate("", payload, "") or "it fails the schema"
    except _OutOfChecks:
        return "it fails the schema (the payload is too large to say where within budget)"


class _OutOfChecks(Exception):
    pass


class _Search:
    def __init__(self, compiled: CompiledSchema, checks: int) -> None:
        self._checks = checks  # each costs at most the whole check's bound
        self._compiled = compiled
        self._root = compiled.schema
        self._draft = {"$schema": s} if (s := self._root.get("$schema")) else {}
        self._registry: Any = None

    def locate(self, pointer: str, value: Any, at: str) -> str | None:
        """The violation of the subschema at ``pointer``, which ``value`` fails."""
        node = resolve(self._root, pointer)
        if node is False:
            return f"at {at or '/'}: nothing is allowed here"
        if not isinstance(node, dict):
            return None
        own = self._part(pointer, "", {k: v for k, v in node.items() if k not in _APPLICATORS})
        try:
            own.validate(value)
        except jsonschema_rs.ValidationError as error:
            return _described(error, at)
        for keyword in (k for k in _ORDER if k in node):
            if not self._keyword(pointer, keyword, node).is_valid(value):
                return self._inside(pointer, keyword, node, value, at)
        last = next((k for k in _LAST if k in node), None)
        return f'at {at or "/"}: fails the schema\'s "{last}" rule' if last else None

    def _inside(self, pointer: str, keyword: str, node: dict[str, Any], value: Any, at: str) -> str:
        """The violation inside the subschemas of a ``keyword`` that failed."""
        found: str | None = None
        here = f"{pointer}/{escape(keyword)}"
        if keyword == "$ref":
            found = self.locate(ref_pointer(node[keyword]), value, at)
        elif keyword == "allOf":
            branches = (f"{here}/{i}" for i in range(len(node[keyword])))
            failing = next((p for p in branches if self._fails(p, value)), None)
            found = self.locate(failing, value, at) if failing is not None else None
        elif keyword == "properties" and isinstance(value, dict):
            for name, item in value.items():
                inner = f"{here}/{escape(name)}"
                if name in node[keyword] and self._fails(inner, item):
                    found = self.locate(inner, item, f"{at}/{escape(name)}")
                    break
        elif keyword == "additionalProperties" and isinstance(value, dict):
            alone = self._keyword(pointer, keyword, node)  # properties passed: this is extra
            for name, item in value.items():
                if not alone.is_valid({name: item}):
                    found = self.locate(here, item, f"{at}/{escape(name)}")
                    break
        elif keyword in ("prefixItems", "items", "additionalItems") and isinstance(value, list):
            found = self._element(here, keyword, node, value, at)
        return found or f'at {at or "/"}: fails the schema\'s "{keyword}" rule'

    def _element(
        self, here: str, keyword: str, node: dict[str, Any], value: list[Any], at: str
    ) -> str | None:
        """The first element that fails the subschema that applies to it."""
        sub = node[keyword]
        if isinstance(sub, list):  # prefixItems, or items as a list (before 2020-12)
            positions = [(f"{here}/{i}", i) for i in range(min(len(sub), len(value)))]
        else:
            if keyword == "items":  # after prefixItems, in 2020-12
                first = len(node.get("prefixItems", []))
            else:  # additionalItems: after items as a list
                first = len(node["items"]) if isinstance(node.get("items"), list) else len(value)
            positions = [(here, i) for i in range(first, len(value))]
        for inner, i in positions:
            if self._fails(inner, value[i]):
                return self.locate(inner, value[i], f"{at}/{i}")
        return None

    def _fails(self, pointer: str, value: Any) -> bool:
        whole = self._part(pointer, "*", {"$ref": f"{HOME}#{pointer}"})
        return not whole.is_valid(value)

    def _keyword(self, pointer: str, keyword: str, node: dict[str, Any]) -> Any:
        """A validator of one applicator of the node at ``pointer``, with the siblings its
        verdict depends on."""
        kept = (keyword, *_SIBLINGS.get(keyword, ()))
        part = {k: self._referring(pointer, k, node[k]) for k in kept if k in node}
        return self._part(pointer, keyword, part)

    def _referring(self, pointer: str, keyword: str, value: Any) -> Any:
        """A keyword's value with each subschema in it replaced by a reference to it."""
        here = f"{pointer}/{escape(keyword)}"
        if keyword == "$ref":
            return f"{HOME}#{ref_pointer(value)}"
        if keyword in ("properties", "patternProperties", "dependentSchemas", "dependencies"):
            return {
                name: {"$ref": f"{HOME}#{here}/{escape(name)}"} if isinstance(sub, dict | bool)
                else sub  # dependencies may list names
                for name, sub in value.items()
            }  # fmt: skip
        if isinstance(value, list):
            return [{"$ref": f"{HOME}#{here}/{i}"} for i in range(len(value))]
        return {"$ref": f"{HOME}#{here}"}

    def _part(self, pointer: str, keyword: str, schema: dict[str, Any]) -> Any:
        """A validator of part of the schema; the search pays a check for each it is asked."""
        if self._checks <= 0:
            raise _OutOfChecks
        self._checks -= 1
        made = self._compiled.parts.get((pointer, keyword))
        if made is None:
            if self._registry is None:
                self._registry = jsonschema_rs.Registry([(HOME, self._root)])
            made = validator({**self._draft, **schema}, registry=self._registry)
            self._compiled.parts[(pointer, keyword)] = made
        return made


def _described(error: Any, at: str) -> str:
    pointer = "".join("/" + escape(str(part)) for part in error.instance_path)
    where = (at + pointer) or "/"
    kind = error.kind
    if isinstance(kind, jsonschema_rs.ValidationErrorKind.Required):
        return f"at {where}: the required property {json.dumps(kind.property)} is missing"
    if isinstance(kind, jsonschema_rs.ValidationErrorKind.Type):
        return f"at {where}: must be of type {' or '.join(map(str, kind.types))}"
    keyword = error.schema_path[-1] if error.schema_path else "schema"
    return f'at {where}: fails the schema\'s "{keyword}" rule'
