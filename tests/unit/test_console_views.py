"""The console's pure parts: the chart's geometry, the dead-letter filter, how times, sizes and
payloads read."""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime, timedelta

import pytest

from app.api.formatting import counts, seconds, size, when
from app.console.routes.charts import stacked_bars
from app.console.routes.filters import dead_filter
from app.core.config import Settings
from app.core.errors import Unprocessable
from app.core.states import OUTCOMES
from app.delivery.service import status
from app.delivery.service.endpoint_stats import MinuteCounts
from app.delivery.service.event_detail import PayloadHead
from app.delivery.service.intake import encode_payload
from app.delivery.service.payload_views import PREVIEW_BYTES, payload_view
from app.flow.service.snapshot import FlowSnapshot
from app.models import Delivery, Endpoint


def minutes(**series: list[int]) -> MinuteCounts:
    length = len(next(iter(series.values())))
    return MinuteCounts(length, {o: series.get(o, [0] * length) for o in OUTCOMES})


def test_bars_stack_by_outcome_and_scale_to_the_busiest_minute() -> None:
    chart = stacked_bars(
        minutes(success=[0, 6, 2], permanent=[0, 2, 0], retryable=[0, 0, 2]), width=300, height=80
    )
    assert chart.peak == 8
    assert chart.totals == {
        "success": 8,
        "retryable": 2,
        "unknown": 0,
        "permanent": 2,
        "blocked": 0,
        "auth_failed": 0,
    }
    by_minute: dict[float, list[tuple[str, float, float]]] = {}
    for bar in chart.bars:
        by_minute.setdefault(bar.x, []).append((bar.outcome, bar.y, bar.height))
    assert sorted(by_minute) == [101.0, 201.0]  # an empty minute draws nothing
    # The busiest minute fills the height: successes at the bottom, the failures above them.
    assert by_minute[101.0] == [("success", 20.0, 60.0), ("permanent", 0.0, 20.0)]
    assert by_minute[201.0] == [("success", 60.0, 20.0), ("retryable", 40.0, 20.0)]
    assert chart.bars[-1].title == "this minute: 2 retryable"
    assert chart.bars[0].title == "1 min ago: 6 success"


def test_a_quiet_hour_draws_no_bars() -> None:
    chart = stacked_bars(minutes(success=[0] * 60))
    assert chart.bars == [] and chart.peak == 0


def test_the_dead_letter_filter_reads_the_page_s_fields() -> None:
    wanted = dead_filter(
        {"endpoint_id": "", "event_type": " order.* ", "dead_after": "2026-12-01T10:30"}
    )
    assert wanted.endpoint_id is None and wanted.event_type == "order.*"
    assert wanted.dead_after == datetime(2026, 12, 1, 10, 30, tzinfo=UTC)  # no zone: UTC
    assert wanted.states == ["dead"]


@pytest.mark.parametrize(
    "given", ["2026-12-01T05:30-05:00", "2026-12-01T10:30Z", "2026-12-01T11:30:00+01:00"]
)
def test_a_time_with_its_own_zone_keeps_it(given: str) -> None:
    wanted = dead_filter({"dead_before": given})
    assert wanted.dead_before == datetime(2026, 12, 1, 10, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"dead_before": "yesterday"}, "Died before: give a date and time, such as 2026"),
        ({"endpoint_id": "not-an-id"}, "Endpoint id: must be an endpoint id (ep_ followed by"),
    ],
)
def test_a_bad_filter_field_is_named_in_words(fields: dict[str, str], message: str) -> None:
    with pytest.raises(Unprocessable) as refused:
        dead_filter(fields)
    assert str(refused.value.detail).startswith(message)


def test_durations_and_times_read_as_a_person_would() -> None:
    assert [seconds(s) for s in (0, 42.4, 420, 12_600, 172_800)] == [
        "0 s",
        "42 s",
        "7 min",
        "3.5 h",
        "2.0 d",
    ]
    assert seconds(math.inf) == "never"
    assert when(datetime(2026, 12, 1, 9, 5, 3, tzinfo=UTC)) == "2026-12-01 09:05:03 UTC"
    assert when(None) == "—"
    assert counts({"enqueued": 3, "repaired": 0, "due_armed": 2}) == "enqueued 3, due armed 2"
    assert counts({}) == "nothing to do"


NOW = datetime(2026, 12, 1, 9, 0, 0, 123456, tzinfo=UTC)
AT = NOW + timedelta(minutes=5, microseconds=654321)  # the moment each explanation names
LONG_AGO = NOW - timedelta(hours=1, microseconds=1)
ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d")


def _waiting(state: str, **fields: object) -> Delivery:
    return Delivery(
        state=state,
        attempt_count=1,
        next_attempt_at=fields.pop("next_attempt_at", NOW),
        lease_until=fields.pop("lease_until", None),
    )


def _endpoint(paused_until: datetime | None = None) -> Endpoint:
    return Endpoint(
        enabled=True,
        deleted_at=None,
        paused_until=paused_until,
        pause_in_force=paused_until is not None,
        pause_reason="receiver answered 429 with Retry-After",
    )


def _flow(woken_in: float | None) -> FlowSnapshot:
    return FlowSnapshot(in_flight=0, max_in_flight=5, next_start_in=0, woken_in=woken_in)


@pytest.mark.parametrize(
    ("delivery", "endpoint", "flow", "moment", "reason"),
    [
        (_waiting("leased", lease_until=AT), _endpoint(), None, AT, "in_flight"),
        (_waiting("leased", lease_until=LONG_AGO), _endpoint(), None, LONG_AGO, "stuck"),
        (_waiting("enqueued"), _endpoint(paused_until=AT), None, AT, "throttled"),
        (_waiting("enqueued", next_attempt_at=AT), _endpoint(), None, AT, "scheduled"),
        (_waiting("enqueued"), _endpoint(), _flow(woken_in=300.654321), AT, "queued"),
        (_waiting("enqueued", next_attempt_at=LONG_AGO), _endpoint(), _flow(None), LONG_AGO,
         "stuck"),
        (_waiting("pending", next_attempt_at=LONG_AGO), _endpoint(), None, LONG_AGO, "stuck"),
    ],
)  # fmt: skip
def test_the_delivery_page_writes_the_why_s_times_as_its_other_times(
    delivery: Delivery,
    endpoint: Endpoint,
    flow: FlowSnapshot | None,
    moment: datetime,
    reason: str,
) -> None:
    settings = Settings()
    why = status.explain(delivery, endpoint, NOW, settings, flow, write_time=when)
    assert why.reason == reason and why.detail is not None
    assert when(moment) in why.detail and not ISO_TIME.search(why.detail)
    # The API keeps ISO 8601 in its words, as in every time field of its JSON.
    api = status.explain(delivery, endpoint, NOW, settings, flow)
    assert moment.isoformat() in str(api.detail)


def test_a_whole_payload_is_pretty_printed_without_changing_a_value() -> None:
    accepted = {"id": "o_42", "total": 0.1 + 0.2, "big": 2**70, "note": "café </pre>"}
    stored = encode_payload(accepted, limit=PREVIEW_BYTES)
    view = payload_view(PayloadHead(stored, len(stored)))
    assert view.whole and view.pretty and view.size == len(stored)
    assert view.text == json.dumps(accepted, indent=2, ensure_ascii=False)
    assert json.loads(view.text) == accepted  # the same value, only laid out


def test_a_payload_that_is_not_json_is_shown_as_it_is() -> None:
    stored = b"not json \xff"
    view = payload_view(PayloadHead(stored, len(stored)))
    assert view.whole and not view.pretty and view.text == "not json \ufffd"


def test_the_start_of_a_large_payload_is_shown_as_sent_and_never_split_in_a_character() -> None:
    head = '{"note":"caf\u00e9'.encode()[:-1]  # cut inside the é's two bytes
    view = payload_view(PayloadHead(head, 200_000))
    assert not view.whole and not view.pretty and view.size == 200_000
    assert view.text == '{"note":"caf'


def test_sizes_read_as_a_person_would() -> None:
    assert [size(n) for n in (0, 842, 16 * 1024, 253_522, 3 * 1024 * 1024 // 2)] == [
        "0 B",
        "842 B",
        "16.0 KiB",
        "247.6 KiB",
        "1.5 MiB",
    ]
