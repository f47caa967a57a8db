"""Which payload classes a day of events is made with: a class for each step the tenants'
payloads fall under, short of the operator's retention; none past it."""

from __future__ import annotations

import pytest

from app.operations.repository.partitions import payload_classes


@pytest.mark.parametrize(
    ("retention_days", "kept", "classes"),
    [
        (30, [], [1]),  # no tenant keeps less: one table
        (30, [1], [1, 2]),
        (30, [2, 3], [1, 4]),  # both under the 3-day step: one class
        (30, [1, 5, 14], [1, 2, 8, 15]),
        (30, [20], [1]),  # under the 30-day step, which is the day's own end
        (365, [20, 100], [1, 31, 181]),
        (0.5, [1], [1]),  # an operator keeping less than a day: nothing to split
    ],
)
def test_a_day_is_split_only_where_a_tenant_keeps_its_payloads_shorter(
    retention_days: float, kept: list[int], classes: list[int]
) -> None:
    assert payload_classes(retention_days, kept) == classes
