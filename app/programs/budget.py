"""What a tenant's program may cost, in steps, and the arithmetic that bounds it.

A step is about a nanosecond of this machine's time (docs/benchmarks.md measures the ratio for
the worst programs the fuzz test makes). Every program Herald runs -- a filter, a schema -- has
its cost bounded when it is saved, as a linear form over what the event brings:

    cost <= constant + coefficient * payload_bytes + sum(weight * size of one payload field)

The form comes from the program's own parse (filter_cost.py walks CEL's checked AST,
payload_schema_cost.py the schema's graph); nothing is measured at run time. Before each
evaluation the form is worked out for the event at hand -- its payload's size, the length of
each field the program loops over -- and a program whose bound is over ``STEPS_PER_EVALUATION``
is not run.
Because the bound is an upper bound, "not over the budget" means "cannot take longer".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

# About 2 ms of one core: what one program may take on one event.
STEPS_PER_EVALUATION = 2_000_000
# About 10 ms: what all the filters of one published event may take together (an event fans
# out to every subscribed endpoint, each with a filter of its own).
STEPS_PER_EVENT = 10_000_000
# A program saved must fit its budget on an event of this size: a bound that a 2 KiB payload
# already breaks is no filter a tenant can use, and is refused when saved, not at every event.
REFERENCE_PAYLOAD_BYTES = 2048

PAYLOAD = "payload"  # the symbol for the payload's size in bytes

# The distinct filters one tenant's endpoints may have: each API process keeps that many of a
# tenant's filters compiled (filters.py), so a tenant never makes another pay for compiling its
# own (1-8 ms each). The endpoints service refuses one more.
FILTERS_PER_TENANT = 1_000


class Unbounded(ValueError):
    """A program whose cost grows faster than the event it runs on (a loop inside a loop over
    the payload, a list built element by element): no budget can hold it. In words."""


@dataclass(frozen=True)
class Linear:
    """``constant + sum(coefficient * symbol)``: an upper bound on a size or a cost. Symbols name
    what the event brings (``payload``, a field's size or length) or, inside a loop, the
    loop's own variables."""

    constant: int = 0
    terms: Mapping[str, int] = field(default_factory=dict)

    @staticmethod
    def of(symbol: str, coefficient: int = 1) -> Linear:
        return Linear(0, {symbol: coefficient})

    def __add__(self, other: Linear | int) -> Linear:
        if isinstance(other, int):
            return Linear(self.constant + other, self.terms)
        terms = dict(self.terms)
        for symbol, coefficient in other.terms.items():
            terms[symbol] = terms.get(symbol, 0) + coefficient
        return Linear(self.constant + other.constant, terms)

    def __radd__(self, other: int) -> Linear:
        return self + other

    def halved(self) -> Linear:
        """Half of this bound, rounded up: still a bound."""
        return Linear(-(-self.constant // 2), {s: -(-c // 2) for s, c in self.terms.items()})

    def times(self, factor: int) -> Linear:
        return Linear(self.constant * factor, {s: c * factor for s, c in self.terms.items()})

    def product(self, other: Linear, why: str) -> Linear:
        """The product of two bounds, which stays linear only if one of them is a constant."""
        if not self.terms:
            return other.times(self.constant)
        if not other.terms:
            return self.times(other.constant)
        raise Unbounded(why)

    @property
    def is_constant(self) -> bool:
        return not any(self.terms.values())

    def coefficient(self, symbol: str) -> int:
        return self.terms.get(symbol, 0)

    def without(self, symbols: Iterable[str]) -> Linear:
        gone = set(symbols)
        return Linear(self.constant, {s: c for s, c in self.terms.items() if s not in gone})

    def substitute(self, symbol: str, value: Linear) -> Linear:
        """This bound with ``symbol`` replaced by the bound ``value``."""
        coefficient = self.coefficient(symbol)
        rest = self.without([symbol])
        return rest + value.times(coefficient) if coefficient else rest

    def at(self, size_of: Callable[[str], int]) -> int:
        """The bound worked out, each symbol given its value for this event."""
        return self.constant + sum(c * size_of(s) for s, c in self.terms.items() if c)


def smaller(first: Linear, second: Linear) -> Linear:
    """A bound on min(first, second): a constant where either is one (comparing a field with a
    literal touches at most the literal's length), else the first."""
    if first.is_constant and second.is_constant:
        return first if first.constant <= second.constant else second
    if second.is_constant:
        return second
    return first


def larger(first: Linear, second: Linear) -> Linear:
    """A bound on max(first, second): the larger constant and, symbol by symbol, the larger
    coefficient (every symbol stands for a size, never negative)."""
    terms = dict(first.terms)
    for symbol, coefficient in second.terms.items():
        terms[symbol] = max(terms.get(symbol, 0), coefficient)
    return Linear(max(first.constant, second.constant), terms)
