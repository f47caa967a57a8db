"""Regular expressions in a tenant's programs: read by RE2 (the syntax CEL's ``matches``
defines), compiled once -- when the program is saved -- and priced by the program RE2 makes.

CEL's runtime compiles a ``matches`` pattern again on every call: ``[\\p{L}\\p{N}]{60}`` is 80,524
RE2 instructions and took 27 ms to build, each event, for each endpoint. So a filter never
calls it: its ``matches`` calls are rewritten, once, to a function that searches with the
pattern compiled here (filters.py), and a pattern must be a literal for that to be possible.

What a search costs is bounded by the compiled program, not by the pattern's text
(``x{1000}`` is six characters and 1,004 instructions): RE2 never backtracks, and its slowest
path -- the NFA it falls back to when a pattern's DFA keeps outgrowing its memory -- takes at
most a few nanoseconds per byte of text per instruction (docs/benchmarks.md measures it). A
pattern over ``MAX_INSTRUCTIONS`` is refused when saved, before RE2 builds more of it than
that: it is first compiled under a memory limit just above what the cap needs, then again
with 1 MiB, room for the DFA to keep most searches on the fast path and a bound on what a
kept pattern holds.
"""

from __future__ import annotations

import weakref

import re2

# The most instructions a pattern may compile to. ``\pL`` alone is 1,200 (every letter of
# Unicode as UTF-8 byte ranges); ``[a-z]{60}`` is 64.
MAX_INSTRUCTIONS = 2_000
# Steps per byte of text per instruction of the pattern's program: the NFA's worst case,
# measured at 6-7 ns with patterns built to keep RE2's DFA from settling (docs/benchmarks.md).
SEARCH_STEP = 8

# RE2 gives up compiling once a program would take more than about two thirds of this; 128 KiB
# holds MAX_INSTRUCTIONS with room and refuses an 80,000-instruction pattern in under 1 ms.
_COMPILE_MEMORY = 128 * 1024
# What a kept pattern may use, its DFA's cache included (RE2's default is 8 MiB, and a pattern
# that keeps meeting new states grows to it: a tenant's thousand filters would be gigabytes).
# Past it RE2 falls back to the NFA, whose cost is what SEARCH_STEP prices.
_SEARCH_MEMORY = 1024 * 1024


class PatternError(ValueError):
    """Why a pattern cannot be used, in words."""


class PatternTooLarge(PatternError):
    """A pattern RE2 reads, but whose program is over ``MAX_INSTRUCTIONS``."""


class Pattern:
    """A pattern compiled, and the size of its program. Held by every program that uses it;
    the search function finds it by its text while one does."""

    __slots__ = ("__weakref__", "instructions", "regex", "source")

    def __init__(self, source: str, regex: re2._Regexp) -> None:
        self.source = source
        self.regex = regex
        self.instructions: int = regex.programsize


# Patterns in use, by their text: a program keeps its own alive, so a pattern no saved
# program uses any more is not kept.
_LIVE: weakref.WeakValueDictionary[str, Pattern] = weakref.WeakValueDictionary()


def compiled(source: str) -> Pattern:
    """The pattern compiled (or the one already compiled for this text); PatternError when
    RE2 does not read it or its program is over ``MAX_INSTRUCTIONS``."""
    live = _LIVE.get(source)
    if live is not None:
        return live
    instructions(source)
    pattern = Pattern(source, re2.compile(source, _options(_SEARCH_MEMORY)))
    _LIVE[source] = pattern
    return pattern


def instructions(source: str) -> int:
    """How many instructions RE2 compiles the pattern to; PatternError when it does not read
    it or they are over ``MAX_INSTRUCTIONS``."""
    try:
        probe = re2.compile(source, _options(_COMPILE_MEMORY))
    except re2.error as exc:
        raise _refusal(exc) from None
    if probe.programsize > MAX_INSTRUCTIONS:
        raise PatternTooLarge(_too_large(probe.programsize))
    return int(probe.programsize)


def _options(max_mem: int) -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # RE2 would write every refused pattern to stderr
    options.max_mem = max_mem
    return options


def search(text: str, source: str) -> bool:
    """CEL's ``matches``: whether the pattern matches anywhere in the text. Only ever called
    by a program holding the compiled pattern (filters.py)."""
    return _LIVE[source].regex.search(text) is not None


def _refusal(exc: re2.error) -> PatternError:
    message = exc.args[0] if exc.args else b""
    text = message.decode(errors="replace") if isinstance(message, bytes) else str(message)
    what = text.split(":")[0].strip()  # RE2 quotes the pattern after the colon
    if what == "pattern too large - compile failed":
        return PatternTooLarge(_too_large(None))
    return PatternError(f"the pattern is not a regular expression RE2 reads ({what or 'invalid'})")


def _too_large(instructions: int | None) -> str:
    size = (
        f"{instructions:,} RE2 instructions; a pattern may compile to"
        if instructions
        else ("more RE2 instructions than a pattern may:")
    )
    return (
        f"the pattern compiles to {size} at most {MAX_INSTRUCTIONS:,} (Unicode classes such as "
        "\\pL are about 1,200 each, and a counted repetition repeats its part)"
    )
