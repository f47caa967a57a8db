from __future__ import annotations

from herald_client.models import Problem


class HeraldError(Exception):
    """Herald answered with an error: its status and its problem document."""

    def __init__(self, status: int, problem: Problem) -> None:
        super().__init__(f"{status} {problem.title}: {problem.detail or ''}".rstrip(": "))
        self.status = status
        self.problem = problem


class InvalidSignature(Exception):
    """A webhook's signature does not match its body, or its timestamp is too old."""
