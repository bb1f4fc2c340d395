"""What the rule language refuses when a rule is parsed or meets its registry, word for
word: every message names the line and the column of the place it is about."""

from __future__ import annotations

import pytest
from refusals import refused

from specula import Graph
from specula.detectors.rules import RuleError
from specula.detectors.rules.detector import RuleDetector
from specula.events import TypeRegistry


def registry(ticks_per_second: float = 1.0) -> TypeRegistry:
    reg = TypeRegistry(ticks_per_second=ticks_per_second)
    reg.register("A", open="f8", n="i8")
    reg.register("B", open="f8", n="i8")
    return reg


@pytest.mark.parametrize("text, message", [
    ("define R() from A() ties strict ties strict",
     "line 1, column 33: expected 'where', 'skip', 'consuming', 'define' or end of text, "
     "found 'ties'"),
    ("define R() from A() within 3 within 3",
     "line 1, column 30: expected 'partition by', 'ties', 'where', 'skip', 'consuming', "
     "'define' or end of text, found 'within'"),
    ("define R() from A() partition by n partition by n",
     "line 1, column 36: expected 'ties', 'where', 'skip', 'consuming', 'define' or end of "
     "text, found 'partition'"),
    ("define R() from A() where 1 = 1 where 1 = 1",
     "line 1, column 33: expected 'and', 'skip', 'consuming', 'define' or end of text, "
     "found 'where'"),
])
def test_a_clause_written_twice_is_not_among_what_is_expected(text, message):
    assert refused(text) == message


LOSSY = ("which would drop its fraction or overflow; declare i: double, or assign an integer")


@pytest.mark.parametrize("text, message", [
    ("define R(i: int) from A() as a\nwhere i = a.open",
     f"line 2, column 7: rule R: where i = a.open assigns a double to the int attribute "
     f"'i', {LOSSY}"),
    ("define R(i: int) from A() as a where i = a.open * 1e30",
     f"line 1, column 38: rule R: where i = a.open * 1e+30 assigns a double to the int "
     f"attribute 'i', {LOSSY}"),
    ("define R(i: int) from A() as a where i = a.n / 2",
     f"line 1, column 38: rule R: where i = a.n / 2 assigns a double to the int attribute "
     f"'i', {LOSSY}"),
    ("define R(i: int) from A() as a and $m = Avg(B().n within 5 from a) where i = $m",
     f"line 1, column 74: rule R: where i = $m assigns a double to the int attribute 'i', "
     f"{LOSSY}"),
    ("define R(i: int) from A() as a where i = a.n + 9223372036854775808",
     f"line 1, column 38: rule R: where i = a.n + 9223372036854775808 assigns a double to "
     f"the int attribute 'i', {LOSSY}"),
])
@pytest.mark.parametrize("engine", ["aip", "cdp"])
def test_a_double_into_an_int_is_refused_with_its_place(text, message, engine):
    assert refused(text, lambda t: RuleDetector(t, registry(), engine=engine)) == message


@pytest.mark.parametrize("text", [
    "define R(i: int) from A() as a where i = a.n * 2 + a.ts",
    "define R(i: int, x: double) from A() as a and $c = Count(B() within 5 from a) "
    "and $s = Sum(B().n within 5 from a) where i = $c + $s and x = a.n / 2",
])
def test_integers_into_an_int_and_doubles_into_a_double_are_kept(text):
    RuleDetector(text, registry())


SPAN = ("more than a window may span (2**62 ticks: time stamps are int64 ticks and the "
        "engines add windows to them); use a shorter window")


@pytest.mark.parametrize("engine", ["aip", "cdp"])
def test_windows_are_checked_against_the_time_unit_when_the_graph_is_built(engine):
    """The same limit on both engines, refused before the first event: 2**62 - 1 ticks
    pass, 2**62 do not, nor 2 million hours at a nanosecond tick."""
    text = "define R() from A() and last B() within {} from A"
    RuleDetector(text.format(2**62 - 1), registry(), engine=engine)
    assert refused(text.format(2**62), lambda t: RuleDetector(t, registry(), engine=engine)
                   ) == f"line 1, column 1: rule R: window '{2**62}' is {2**62} ticks, {SPAN}"
    reg = registry(ticks_per_second=1e9)
    with pytest.raises(RuleError) as info:
        Graph(reg, sources=("A", "B")).add(
            "r", RuleDetector(text.format("2e6 h"), reg, engine=engine))
    assert str(info.value) == ("line 1, column 1: rule R: window '2e+06 h' is "
                               f"7200000000000000000 ticks, {SPAN}")


@pytest.mark.parametrize("text, message", [
    ("define R() from A()\n  and last E() within 3 from A",
     "line 2, column 12: rule R: event type 'E' is not registered; register it first "
     "(registry.register('E', attr=dtype, ...))"),
    ("define R() from A()\n  and last B(z = 1) within 3 from A",
     "line 2, column 14: rule R: event type 'B' has no attribute 'z'; its attributes are "
     "open, n"),
])
def test_registry_errors_name_line_and_column(text, message):
    assert refused(text, lambda t: RuleDetector(t, registry())) == message


@pytest.mark.parametrize("text, message", [
    ('define R() from A() as a\nwhere "x" = 3',
     'line 2, column 7: rule R: "x" is compared with the number 3; a string equals only a '
     'string'),
    ('define R() from A() as a where "x" < "y"',
     "line 1, column 32: rule R: \"x\" is compared with '<'; strings compare only with = "
     "and !="),
    ('define R(s: int) from A() as a where s = "x" + 1',
     "line 1, column 42: rule R: \"x\" is used in arithmetic ('+'); a string is only "
     "compared (= or !=) or assigned"),
])
def test_string_literals_out_of_place_name_line_and_column(text, message):
    assert refused(text) == message


def test_closure_bounds_out_of_range_point_at_the_bounds():
    assert refused("define R() from A()\n and each B(n=1){3,2} as bs within 3 from A") == (
        "line 2, column 17: rule R: closure bs{3,2} needs 0 <= n <= m <= 16 and m >= 1")
