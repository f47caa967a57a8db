"""The repository functions that commit on their own -- one statement on a pooled asyncpg
connection, no BEGIN/COMMIT -- are exactly the named hot paths of the transaction rule
(docs/architecture.md). Every other repository function takes the caller's session."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HOT_PATHS = {
    "delivery/repository/intents.py": {"insert_for_endpoint"},
    "outbox/repository/outbox.py": {"mark_published"},
    "engine/repository/delivery_leases.py": {
        "claim_batch",
        "next_wake",
        "still_held",
    },
    "engine/repository/delivery_records.py": {"record_batch", "record_ordered", "release_batch"},
    "engine/repository/polled_rows.py": {"held_reads", "succeeded", "give_back"},
    "reconcile/repository/reconcile_scans.py": {"live_destinations"},
    "streams/repository/repair.py": {"live_streams"},
}


def own_transaction_functions(path: Path) -> set[str]:
    """Functions whose first parameter is an ``asyncpg.Connection``."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.AsyncFunctionDef | ast.FunctionDef) and node.args.args:
            annotation = node.args.args[0].annotation
            if annotation is not None and ast.unparse(annotation) == "asyncpg.Connection":
                found.add(node.name)
    return found


def test_only_the_named_hot_paths_run_outside_the_callers_transaction() -> None:
    found = {
        str(path.relative_to(REPO / "app")): names
        for path in sorted((REPO / "app").glob("*/repository/*.py"))
        if (names := own_transaction_functions(path))
    }
    assert found == HOT_PATHS


def test_the_transaction_rule_names_every_hot_path() -> None:
    rule = (REPO / "docs" / "architecture.md").read_text()
    for path, names in HOT_PATHS.items():
        table_module = Path(path).stem
        for name in names:
            assert f"{table_module}.{name}" in rule or f"`{name}`" in rule, name


def test_the_check_sees_a_connection_parameter(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import asyncpg\n"
        "async def hot(connection: asyncpg.Connection, n: int) -> None: ...\n"
        "async def cold(session: object, connection: asyncpg.Connection) -> None: ...\n"
    )
    assert own_transaction_functions(sample) == {"hot"}


def test_no_repository_commits_or_opens_a_transaction() -> None:
    opened = {
        f"{path.relative_to(REPO)}:{node.lineno}"
        for path in (REPO / "app").glob("*/repository/*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute) and node.attr in {"commit", "begin", "transaction"}
    }
    assert opened == set()
