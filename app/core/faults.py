"""Crash-point fault injection: with ``HERALD_FAULT=<point>`` the process dies abruptly (no
cleanup, no flush, no rollback) the first time it reaches that point -- or, at a stall point,
stops until it is resumed; at an error point, the code there raises as a bug would. Inert
unless set.

The points are the failure boundaries named in design.md; the fault suite kills real processes
at each one and proves that recovery loses nothing.
"""

from __future__ import annotations

import os
import signal
import sys

# Stall points: the process stops itself (SIGSTOP) the first time it gets there, as a stalled
# event loop or a paused virtual machine would, until the test resumes it (SIGCONT).
STALL_POINTS = frozenset({"worker.stall_after_claim"})
# Error points: every time, an exception no handler there foresaw.
ERROR_POINTS = frozenset({"worker.error_while_sending"})
FAULT_POINTS = frozenset(
    {
        "api.before_commit",
        "api.after_commit_before_publish",
        "relay.after_enqueue_before_mark",
        "worker.after_take_before_claim",
        "worker.after_claim_before_send",
        "worker.after_send_before_record",
        "worker.after_record_before_ack",
        *STALL_POINTS,
        *ERROR_POINTS,
    }
)
# A distinctive exit status, so a test can tell an injected crash from any other death.
FAULT_EXIT_CODE = 86
_stalled: set[str] = set()


def crash_point(name: str, configured: str | None) -> None:
    assert name in FAULT_POINTS, name
    if configured == name:
        sys.stderr.write(f"herald: fault injected at {name}; exiting\n")
        sys.stderr.flush()
        os._exit(FAULT_EXIT_CODE)


def stall_point(name: str, configured: str | None) -> None:
    assert name in STALL_POINTS, name
    if configured == name and name not in _stalled:
        _stalled.add(name)
        sys.stderr.write(f"herald: stalled at {name}; waiting for SIGCONT\n")
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGSTOP)


class InjectedError(RuntimeError):
    """Raised at an error point: stands for a bug."""


def error_point(name: str, configured: str | None) -> None:
    assert name in ERROR_POINTS, name
    if configured == name:
        raise InjectedError(f"fault injected at {name}")
