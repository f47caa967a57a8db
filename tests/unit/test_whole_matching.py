"""Every rule a string is held to is checked against the whole string. Python's ``re.match``
with ``$`` stops short: ``$`` also matches before a final newline, so ``"cat.b\\n"`` passed the
event-type rule, ``"Host\\n"`` the header-name rule and ``"dlv_…\\n"`` the id rule. The product
checks with ``fullmatch`` (``TextRule.matches``, ``app.core.ids``); this test keeps it so."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from pydantic import ValidationError

from app.core.config import Settings
from app.core.fields import EVENT_TYPE_RULE, ONE_LINE_RULE, TextRule

REPO = Path(__file__).resolve().parents[2]
PRODUCT = ("app", "workers", "devstack")
# pydantic's own `pattern=` runs on Rust's regex engine, where `$` is the end of the text
# only; each use is listed here and checked below.
PYDANTIC_PATTERNS = {"app/core/config.py": 3}


def _calls(tree: ast.AST) -> list[ast.Call]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)]


def partial_matches(source: str) -> list[int]:
    """Lines that call ``.match(`` -- ``re.match`` or a compiled pattern's -- rather than
    ``fullmatch``."""
    return [
        call.lineno
        for call in _calls(ast.parse(source))
        if isinstance(call.func, ast.Attribute) and call.func.attr == "match"
    ]


def pydantic_patterns(source: str) -> int:
    return sum(
        1 for call in _calls(ast.parse(source)) for kw in call.keywords if kw.arg == "pattern"
    )


def _product_sources() -> dict[str, str]:
    return {
        str(path.relative_to(REPO)): path.read_text()
        for package in PRODUCT
        for path in sorted((REPO / package).rglob("*.py"))
    }


def test_no_product_code_matches_only_the_start_of_a_string() -> None:
    found = {
        path: lines
        for path, source in _product_sources().items()
        if (lines := partial_matches(source))
    }
    assert found == {}, "use fullmatch (or TextRule.matches): `$` matches before a final newline"


def test_every_pydantic_pattern_is_one_checked_here() -> None:
    found = {
        path: count
        for path, source in _product_sources().items()
        if (count := pydantic_patterns(source))
    }
    assert found == PYDANTIC_PATTERNS


def test_the_checks_see_a_partial_match_and_a_pattern() -> None:
    source = (
        "import re\n"
        "re.match(r'^a$', s)\n"
        "NAME = re.compile(r'^a$')\n"
        "NAME.match(s)\n"
        "NAME.fullmatch(s)\n"
        "Field(pattern=r'^a$')\n"
    )
    assert partial_matches(source) == [2, 4]
    assert pydantic_patterns(source) == 1


def test_the_region_setting_refuses_a_trailing_newline() -> None:
    assert Settings(region="eu-1").region == "eu-1"
    with pytest.raises(ValidationError):
        Settings(region="eu-1\n")


def test_the_webhook_origin_setting_refuses_a_trailing_newline() -> None:
    """It goes out as a header value on every delivery to a consenting receiver."""
    assert Settings(webhook_origin="webhooks.example.com").webhook_origin == "webhooks.example.com"
    for spoiled in ("webhooks.example.com\n", "a b", "-x", ""):
        with pytest.raises(ValidationError):
            Settings(webhook_origin=spoiled)


@pytest.mark.parametrize(
    ("rule", "good"),
    [(EVENT_TYPE_RULE, "order.paid"), (ONE_LINE_RULE, "a name"), (TextRule(r"^x$", "x"), "x")],
)
def test_a_text_rule_holds_the_whole_string(rule: TextRule, good: str) -> None:
    assert rule.matches(good)
    for spoiled in (good + "\n", good + "\r\n", good + "\nmore"):
        assert not rule.matches(spoiled), repr(spoiled)


def test_the_webhook_origin_is_a_dns_name_by_default() -> None:
    # Unset: the public URL's host, which names every sender behind it; without one, a name
    # reserved for this machine -- never a bare word, and never someone else's.
    assert Settings().webhook_origin == "herald.localhost"
    public = "https://hooks.acme.test/herald"
    assert Settings(public_url=public).webhook_origin == "hooks.acme.test"
    assert Settings(public_url=public, webhook_origin="a.test").webhook_origin == "a.test"


def test_the_user_agent_setting_is_one_printable_line() -> None:
    """It goes out as a header value on every request Herald sends."""
    assert Settings(user_agent="AcmeHooks/2 (+x)").user_agent == "AcmeHooks/2 (+x)"
    for spoiled in ("AcmeHooks/2\n", "a\r\nX-Injected: 1", " leading", "", "é", "x" * 201):
        with pytest.raises(ValidationError):
            Settings(user_agent=spoiled)
