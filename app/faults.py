"""Crash-point fault injection: with ``HERALD_FAULT=<point>`` the process dies abruptly (no
cleanup, no flush, no rollback) the first time it reaches that point. Inert unless set.

The points are the failure boundaries named in design.md; the fault suite kills real processes
at each one and proves that recovery loses nothing.
"""

from __future__ import annotations

import os
import sys

FAULT_POINTS = frozenset(
    {
        "api.before_commit",
        "api.after_commit_before_publish",
        "relay.after_enqueue_before_mark",
        "worker.after_claim_before_send",
        "worker.after_send_before_record",
        "worker.after_record_before_ack",
    }
)
# A distinctive exit status, so a test can tell an injected crash from any other death.
FAULT_EXIT_CODE = 86


def crash_point(name: str, configured: str | None) -> None:
    assert name in FAULT_POINTS, name
    if configured == name:
        sys.stderr.write(f"herald: fault injected at {name}; exiting\n")
        sys.stderr.flush()
        os._exit(FAULT_EXIT_CODE)
