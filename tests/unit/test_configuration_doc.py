"""docs/configuration.md is what ``make docs`` writes from Settings: a setting added, removed or
given another default or bound without the page written again fails here."""

from __future__ import annotations

import pytest

from app.core.config import Settings
from devstack import settings_doc


def test_the_configuration_page_is_the_one_the_settings_make() -> None:
    assert settings_doc.PAGE.read_text() == settings_doc.render(), (
        "docs/configuration.md differs from Settings: run `make docs`"
    )


def test_a_setting_without_a_description_stops_the_page(monkeypatch: pytest.MonkeyPatch) -> None:
    [(title, settings), *rest] = settings_doc.SECTIONS
    monkeypatch.setattr(settings_doc, "SECTIONS", [(title, settings[1:]), *rest])
    with pytest.raises(ValueError, match=f"no description for \\['{settings[0][0]}'\\]"):
        settings_doc.render()


def test_every_setting_is_on_the_page_once() -> None:
    page = settings_doc.render()
    for name in Settings.model_fields:
        assert page.count(f"| `HERALD_{name.upper()}` |") == 1, name
