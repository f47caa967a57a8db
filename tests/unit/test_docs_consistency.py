"""The docs say one thing, and it is what the code does: read the pages and hold them to the code
they describe."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from app.core.ids import KINDS
from tests.fixtures.worker_stop import RULE, settings_from, worker_stop_seconds

REPO = Path(__file__).resolve().parents[2]
API = (REPO / "docs" / "api.md").read_text()
OPERATIONS = (REPO / "docs" / "operations.md").read_text()


def prose(text: str) -> str:
    """Text as a reader takes it: no Markdown backticks, no comment markers, one space apart."""
    lines = [re.sub(r"^\s*#\s?", "", line) for line in text.splitlines()]
    return " ".join(" ".join(lines).replace("`", "").split())


def test_every_doc_about_stopping_a_worker_states_the_one_rule() -> None:
    rule = prose(RULE)
    for path in (
        "docs/operations.md",
        "deploy/kubernetes/README.md",
        "deploy/kubernetes/30-worker.yaml",
        "deploy/compose.yaml",
    ):
        assert rule in prose((REPO / path).read_text()), path


def test_the_stop_figures_are_the_rule_at_the_defaults_and_in_deploy() -> None:
    said = re.search(
        r"(\d+) s with the defaults \((\d+) \+ (\d+) \+ (\d+)\), (\d+) s in deploy/",
        prose(OPERATIONS),
    )
    assert said, "docs/operations.md no longer gives the rule's figures"
    total, grace, lease, margin, in_deploy = (float(n) for n in said.groups())
    defaults = settings_from({})
    assert (grace, lease) == (defaults.shutdown_grace, defaults.lease_duration)
    assert total == grace + lease + margin == worker_stop_seconds(defaults)
    config = yaml.safe_load((REPO / "deploy/kubernetes/00-config.yaml").read_text())["data"]
    assert in_deploy == worker_stop_seconds(settings_from(config))


def test_the_api_guide_names_every_id_prefix_herald_makes_and_what_it_names() -> None:
    paragraph = prose(API.split("**Ids** are", 1)[1].split("\n\n", 1)[0])
    listed = dict(re.findall(r"\b([a-z]+)_ an? ([A-Za-z ]+?)[,.(]", paragraph))
    assert set(listed) == set(KINDS), paragraph
    for prefix, kind in KINDS.items():
        assert kind.lower() in listed[prefix].lower(), (prefix, listed[prefix])


def test_the_api_guide_says_what_an_endpoint_without_event_types_receives() -> None:
    said = prose(API)
    assert "event_types is left out or null receives every event type" in said
    assert "an empty list [] receives no event" in said


def test_every_test_the_architecture_names_for_a_step_exists() -> None:
    # architecture.md's step table names the tests of each step: a renamed or deleted test
    # file must take its name out of the table too.
    architecture = (REPO / "docs" / "architecture.md").read_text()
    table = architecture[architecture.index("| step | module | tests") :].split("\n\n")[0]
    rows = [row for row in table.splitlines()[2:] if row.startswith("|")]
    assert len(rows) >= 15
    for row in rows:
        tests = row.rstrip("|").split("|")[-1]
        named = re.findall(r"(unit|integration|system|browser)/((?:`test_\w+`(?:, )?)+)", tests)
        assert named, row
        for tier, files in named:
            for name in re.findall(r"`(test_\w+)`", files):
                assert (REPO / "tests" / tier / f"{name}.py").is_file(), f"{tier}/{name} in: {row}"
