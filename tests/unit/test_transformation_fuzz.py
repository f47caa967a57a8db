"""Hostile transformations, generated: the filters' hostile programs (test_filter_fuzz.py) put
where a transformation computes its request -- the skip, the body, a header -- beside bodies
that copy and concatenate the payload. Whatever a tenant writes, Herald refuses it when saved
or bounds its work (every loop turn is in the bound), and a run makes a request or says why
not, in words: it is never run over its budget."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import event, given
from hypothesis import strategies as st

from app.programs import transformations
from app.programs.budget import STEPS_PER_EVALUATION, STEPS_PER_EVENT
from app.programs.cel_programs import bound_on
from app.programs.filter_cost import CONVERT_BYTE, ITERATION
from tests.unit.test_filter_fuzz import FUZZ, PAYLOADS, Cel, _cel

# Where a generated condition goes, and bodies that build text from the payload.
SHAPES = st.sampled_from(
    [
        '{{"skip": {c}}}',
        '{{"body": {{"ok": {c}, "b": payload.b + payload.b + "!"}}}}',
        '{{"body": [{c}, payload.a, payload.lines], "headers": {{"X-B": "b"}}}}',
        '{{"body": {{"n": {{"m": {{"deep": {c}}}}}}}, "path": "/x/" + type}}',
        '{{"query": {{"q": payload.b}}, "skip": !({c})}}',
        '{c} ? {{"skip": true}} : {{"skip": false}}',
    ]
)


@FUZZ
@given(condition=_cel(3, None, ()), shape=SHAPES, payload=PAYLOADS)
def test_a_hostile_transformation_is_refused_or_bounded_and_never_run_over_budget(
    condition: Cel, shape: str, payload: dict[str, Any]
) -> None:
    source = shape.format(c=condition.text)
    try:
        program = transformations.compiled(source)
    except transformations.TransformationError as refused:
        event(f"refused: {str(refused).split(':')[0][:60]}")
        return
    assert not condition.quadratic, source
    assert not condition.builds_lists, source
    encoded = json.dumps(payload).encode()
    bound = bound_on(program.cost, payload, len(encoded))
    assert condition.turns({"payload": payload}) * ITERATION <= bound, source
    over = bound > STEPS_PER_EVALUATION or bound + CONVERT_BYTE * len(encoded) > STEPS_PER_EVENT
    try:
        made = transformations.run(program, "order.paid", encoded, max_body_bytes=1 << 20)
    except transformations.TransformationFailed as failed:
        why = str(failed)
        assert why and "Traceback" not in why
        if over:
            assert why.startswith("the transformation was not run"), why
            event("not run: over budget on this event")
        else:
            event(f"failed: {why[:40]}")
        return
    assert not over, source
    assert made.bound == bound
    if not made.skip and '"body"' in source:  # the body it made, as JSON
        assert made.body is not None and json.loads(made.body) is not None, source
    event("skipped" if made.skip else "made a request")
