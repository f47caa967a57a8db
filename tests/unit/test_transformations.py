"""What a transformation may make, decided from its value as a server would read it: a path
that cannot leave the URL's path however it is escaped, bodies whose maps have text keys only
(so no two processes write different bytes), headers in name order and never the trace
context, map keys the runtime refuses said in words when saved, and a payload parsed only by a
program that reads it, and only within its budget."""

from __future__ import annotations

import json

import pytest

from app.programs import transformations
from app.programs.budget import STEPS_PER_EVENT
from app.programs.cel_programs import bound_on
from app.programs.transformations import TransformationError, TransformationFailed


def _made(source: str, payload: bytes = b"{}") -> transformations.Transformed:
    program = transformations.compiled(source)
    return transformations.run(program, "order.paid", payload, max_body_bytes=1 << 20)


@pytest.mark.parametrize(
    "path",
    ["/%2e%2e/admin", "/.%2e/admin", "/%2E./admin", "/..;/admin", "/a/..", "/./a", "/a%2fb",
     "/a%2Fb", "/a%5cb", "/a/%2e", "//x", "/a?x=1", "/a#f", "a/b", "/a b"],
)  # fmt: skip
def test_a_path_that_could_climb_out_of_the_urls_path_is_refused(path: str) -> None:
    with pytest.raises(TransformationFailed, match="path must start with /"):
        _made(json.dumps({"path": path}))


def test_a_path_stays_under_the_urls_own_path() -> None:
    made = _made('{"path": "/channels/caf%C3%A9;v=1", "query": {"b": "2", "a": "x y"}}')
    url = made.url_for("https://chat.example/hooks/?k=1")
    assert url == "https://chat.example/hooks/channels/caf%C3%A9;v=1?k=1&a=x+y&b=2"


@pytest.mark.parametrize("key", ['b"a"', "1.5", "null", "[1]", 'duration("1s")'])
def test_a_map_key_the_runtime_refuses_is_refused_in_words_when_saved(key: str) -> None:
    with pytest.raises(TransformationError, match="not a valid CEL expression"):
        transformations.compiled(f'{{"body": {{{key}: 1}}}}')


def test_a_body_with_keys_that_are_not_text_is_refused_whatever_the_maps_order() -> None:
    # true and 1 are one key to Python: which survived would hang on the runtime's order.
    for source in ('{"body": {true: "a", 1: "b"}}', '{"body": {"x": [{1: "a"}]}}'):
        with pytest.raises(TransformationFailed, match="a key that is not text"):
            _made(source)


def test_headers_are_in_name_order_and_the_trace_context_is_heralds() -> None:
    made = _made('{"headers": {"X-B": "2", "X-A": "1", "X-C": "3"}}')
    assert list(made.headers) == ["X-A", "X-B", "X-C"]
    with pytest.raises(TransformationFailed, match="traceparent is Herald's"):
        _made('{"headers": {"traceparent": "00-x"}}')


def test_a_payload_is_parsed_only_by_a_program_that_reads_it() -> None:
    # Not JSON at all: a program that never reads the payload never parses it.
    assert _made('{"skip": type == "order.paid"}', b"[not json").skip


def test_a_payload_too_large_to_read_within_the_budget_is_not_parsed() -> None:
    too_large = b"[" * (STEPS_PER_EVENT // 100)  # not JSON: parsing it would fail loudly
    with pytest.raises(TransformationFailed, match="was not run: reading this event's"):
        _made('{"body": payload}', too_large)


def test_a_field_named_with_a_dot_is_not_taken_for_a_path() -> None:
    # payload["a.b"].c and payload.a.b.c are two fields: the loop is bounded by its own.
    program = transformations.compiled(
        '{"skip": payload.a.b.c.all(x, x == 0) && payload["a.b"].c == 1}'
    )
    payload = {"a": {"b": {"c": [0] * 5000}}, "a.b": {"c": 1}}
    assert bound_on(program.cost, payload, len(json.dumps(payload))) > 5000 * 60
