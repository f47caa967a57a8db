"""Hostile filters, generated: whatever CEL a tenant writes -- loops nested in loops, map and
filter, strings that spell code -- Herald either refuses it when saved or bounds its work, and
the bound holds every loop turn, worked out from the payload independently of Herald's model.
(Schemas and patterns: test_program_fuzz.py.)"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from app.programs import filters
from app.programs.budget import STEPS_PER_EVALUATION
from app.programs.filter_cost import ITERATION

FUZZ = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)

Env = dict[str, Any]  # the payload, and each enclosing loop's element


def _none(env: Env) -> int:
    return 0


@dataclass(frozen=True)
class Cel:
    text: str
    quadratic: bool  # walks something as large as the event once per element of a loop
    builds_lists: bool  # map or filter
    # An upper bound on the loop turns it makes: every element of every range it walks,
    # worked out from the values (no short-circuit), independently of Herald's model.
    turns: Callable[[Env], int] = _none


FIELDS = ("a", "b", "lines")
STRINGS = st.sampled_from(
    [
        '"x"',
        'r"\\\\"',  # a raw string holding a backslash
        "r'\\\\'",
        '"""a "quoted" \\""" b"""',
        "'''//not a comment'''",
        '"\\u0070ayload.a.all(x, true)"',  # an escape that spells code, inside a string
        '"a.all(x, payload.a.all(y, true))"',
        'b"\\x00\\xff"',
    ]
)
DECOR = st.sampled_from(["", " ", "\n", " // a comment, all( exists( \n", "\t"])


def _atom(var: str | None) -> st.SearchStrategy[Cel]:
    base = [
        st.just(Cel("true", False, False)),
        st.builds(lambda s: Cel(f"{s} != {s}", False, False), STRINGS),
        st.builds(lambda f: Cel(f"has(payload.{f})", False, False), st.sampled_from(FIELDS)),
        st.just(Cel('type.startsWith("order.")', False, False)),
    ]
    if var is not None:
        base += [
            st.just(Cel(f"{var} == 0", False, False)),
            st.just(Cel(f'{var}.matches("^(a+)+$")', False, False)),
            st.just(Cel(f"{var} in payload.a", True, False)),  # a walk of payload per element
            st.just(Cel(f'{var} + "x" == "y"', False, False)),
        ]
    else:
        base += [
            st.just(Cel("payload.a == payload.b", False, False)),
            st.just(Cel('payload.b.contains("xyz")', False, False)),
            st.just(Cel("0 in payload.a", False, False)),
        ]
    return st.one_of(base)


def _range(source: str, env: Env) -> list[Any]:
    if source.startswith("payload."):
        value = env["payload"].get(source.removeprefix("payload."))
    elif source.endswith(".tags"):
        element = env[source.removesuffix(".tags")]
        value = element.get("tags") if isinstance(element, dict) else None
    else:
        value = env[source]
    return list(value) if isinstance(value, list | dict) else []


def _cel(depth: int, var: str | None, outer: tuple[str, ...]) -> st.SearchStrategy[Cel]:
    if depth == 0:
        return _atom(var)
    inner = _cel(depth - 1, var, outer)
    name = f"v{len(outer)}"

    def joined(left: Cel, op: str, right: Cel, decor: str) -> Cel:
        return Cel(
            f"({left.text}{decor}{op} {right.text})",
            left.quadratic or right.quadratic,
            left.builds_lists or right.builds_lists,
            lambda env: left.turns(env) + right.turns(env),
        )

    def loop(macro: str, source: str, body: Cel, decor: str) -> Cel:
        # The loop's range: the payload's own field, or a part of the enclosing element.
        text = f"{source}.{decor}{macro}({name}, {body.text})"
        if macro in ("map", "filter"):
            text = f"{text}.size() > 0"

        def turns(env: Env) -> int:
            elements = _range(source, env)
            return len(elements) + sum(body.turns({**env, name: e}) for e in elements)

        return Cel(
            text,
            body.quadratic or (source.startswith("payload") and bool(outer)),
            body.builds_lists or macro in ("map", "filter"),
            turns,
        )

    sources = [f"payload.{f}" for f in FIELDS]
    if var is not None:  # inside a loop: mostly a part of the element, sometimes the payload
        sources = [f"{var}.tags", var, f"{var}.tags", *sources]
    body = _cel(depth - 1, name, (*outer, name))
    loops = st.builds(
        loop,
        st.sampled_from(["all", "exists", "exists_one", "map", "filter"]),
        st.sampled_from(sources),
        body,
        DECOR,
    )
    # Loops first and twice: nesting is where the cost hides.
    return st.one_of(
        loops,
        st.builds(joined, loops, st.sampled_from(["&&", "||"]), inner, DECOR),
        loops,
        st.builds(lambda c: Cel(f"!({c.text})", c.quadratic, c.builds_lists, c.turns), inner),
        inner,
    )


def _elements(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[list[Any]]:
    """Lists short and long: a few elements, or enough to go over a filter's budget."""
    return st.builds(
        lambda n, item: [item] * n, st.sampled_from([0, 3, 200, 3000, 12000]), strategy
    )


PAYLOADS = st.fixed_dictionaries(
    {
        "a": _elements(st.integers(0, 3)),
        "b": st.text(max_size=300),
        "lines": st.lists(
            st.fixed_dictionaries({"tags": _elements(st.integers(0, 2))}), max_size=8
        ),
    }
)


@FUZZ
@given(program=_cel(3, None, ()), payload=PAYLOADS)
def test_a_hostile_filter_is_refused_or_its_loops_are_bounded(
    program: Cel, payload: dict[str, Any]
) -> None:
    try:
        compiled = filters.compiled(program.text)
    except filters.FilterError as refused:
        event(f"filter refused: {str(refused).split(':')[0]}")
        return  # refused when saved, in words
    assert not program.quadratic, program.text
    assert not program.builds_lists, program.text
    published = filters.Events("order.paid", payload, len(json.dumps(payload)), tenant_id="t")
    bound = published.bound(compiled)
    # Every turn of every loop is in the bound (ITERATION steps each, beside its body).
    assert program.turns({"payload": payload}) * ITERATION <= bound, program.text
    matched, why = published.matches(program.text)
    assert matched is True or why
    event("filter with loops" if "(v0," in program.text else "filter without loops")
    if bound > STEPS_PER_EVALUATION:
        event("filter not run: over budget on this event")
        assert why is not None and why.startswith("the filter was not run")
