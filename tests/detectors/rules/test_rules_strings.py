"""String attributes and literals in rules: the syntax (escapes), the messages for strings
mixed with numbers, and a detector emitting string attributes.

Their answers are checked against the brute-force reference, which compares texts
itself, by the catalogue cases ``strings``, ``strings_partition`` and ``R1``-``R3``
(string areas) in ``test_rules_differential.py``.
"""

from __future__ import annotations

import pytest
from refusals import refused
from rules_reference import quotes_registry

from specula.detectors import Emitter
from specula.detectors.rules import RuleDetector, parse_rule
from specula.detectors.rules.ast import Const, Constraint
from specula.detectors.rules.expand import expand
from specula.events import decode_event, encode_event
from specula.events.strings import string_code


def test_string_literals_with_escapes_parse_and_become_codes_for_the_engines():
    rule = parse_rule(r'''define S(s: string) from Q(sym = "a\"b\\c\u00e9" and ex != "")
        where s = "tab\there"''')
    assert rule.terminator.constraints == (Constraint("sym", "=", 'a"b\\cé'),
                                          Constraint("ex", "!=", ""))
    assert rule.assignments[0][1] == Const("tab\there")
    assert not rule.plain and rule.texts() == {'a"b\\cé', "", "tab\there"}
    (plain,) = expand(rule)
    assert plain.terminator.constraints[0].value == string_code('a"b\\cé')
    assert plain.terminator.constraints[1].value == 0
    assert plain.assignments[0][1] == Const(string_code("tab\there")) and plain.plain


@pytest.mark.parametrize("text, message", [
    ('define X() from Q(sym < "AAPL")',
     "line 1, column 23: strings compare only with = and !=, found '<'"),
    ('define X() from Q() as q where q.sym > "a"',
     "line 1, column 40: rule X: \"a\" is compared with '>'; strings compare only with = "
     "and !="),
    ('define X() from Q() as q where 3 = "a"',
     'line 1, column 36: rule X: "a" is compared with the number 3; a string equals only '
     "a string"),
    ('define X(s: string) from Q() as q where s = "a" + q.x',
     "line 1, column 45: rule X: \"a\" is used in arithmetic ('+'); a string is only "
     "compared (= or !=) or assigned"),
    # a minus sign before a string is arithmetic too (it raised a bare TypeError)
    ('define X(s: string) from Q() as q where s = -"a"',
     "line 1, column 46: rule X: \"a\" is used in arithmetic ('-'); a string is only "
     "compared (= or !=) or assigned"),
    (r'define X() from Q(sym = "a\q")', "line 1, column 27: unknown escape '\\q' in a "
     'string; use \\", \\\\, \\n, \\t, \\r or \\uXXXX'),
    ('define X() from Q(sym = "abc)',
     "line 1, column 25: a string that does not end on its line (close it with '\"')"),
])
def test_what_the_parser_refuses_of_strings(text: str, message: str):
    assert refused(text) == message


HEAD = "define S(s: string, p: int) from Q(sym = $s) as q and "


@pytest.mark.parametrize("text, message", [
    ('each T(px = "AAPL") within 3 from q',
     'line 1, column 62: rule S: T(px = "AAPL") compares the number attribute px with a string'),
    ("each T(sym = 3) within 3 from q",
     "line 1, column 62: rule S: T(sym = 3) compares the string attribute sym with a number"),
    ("each T(ex < q.ex) within 3 from q",
     "line 1, column 62: rule S: T.ex < q.ex: strings compare only with = and !="),
    ("each T(px = q.sym) within 3 from q",
     "line 1, column 62: rule S: T.px = q.sym compares a number with a string"),
    ("each T(px=$s) within 3 from q",
     "line 1, column 62: rule S: $s is bound to the string attribute sym and to the number "
     "attribute px"),
    ("each T() within 3 from q where p = q.sym",
     "line 1, column 86: rule S: p is declared int but assigned a string (q.sym)"),
    ("each T() within 3 from q where s = q.px",
     "line 1, column 86: rule S: s is declared string but assigned a number (q.px)"),
    ("each T() within 3 from q where p = q.sym + 1",
     "line 1, column 92: rule S: q.sym is a string; arithmetic ('+') takes numbers"),
    ("each T() within 3 from q and $m = Max(N().sym within 3 from q)",
     "line 1, column 97: rule S: Max over the string attribute N.sym; only Count counts strings"),
])
def test_what_a_detector_refuses_of_strings_against_the_registry(text: str, message: str):
    assert refused(HEAD + text, lambda t: RuleDetector([parse_rule(t)], quotes_registry())
                   ) == message


@pytest.mark.parametrize("engine", ["aip", "cdp"])
def test_detector_emits_string_attributes_that_read_back_as_text(engine: str):
    registry = quotes_registry()
    rule = parse_rule('''define Pair(sym: string, venue: string, tag: string)
        from T(sym = $s and ex != "naïve") as t and last Q(sym = $s) as q within 5 from t
        where sym = $s and venue = q.ex and tag = "pair \\"1\\""''')
    det = RuleDetector([rule], registry, engine=engine)  # type: ignore[arg-type]
    events = registry.from_records([
        {"type": "Q", "ts": 1, "sym": "AAPL", "ex": "NYSE"},
        {"type": "Q", "ts": 2, "sym": "AMZN", "ex": "NASDAQ"},
        {"type": "T", "ts": 4, "sym": "AAPL", "ex": "IEX"},
        {"type": "T", "ts": 5, "sym": "AMZN", "ex": "naïve"},
    ], dtype=registry.dtype(["Q", "T"]))
    emit = Emitter()
    det.on_batch(events, [t.name for t in registry.types()], emit)
    det.on_end(emit)
    ((name, columns, _),) = emit.column_batches
    assert name == "Pair"
    assert registry["Pair"].strings == {"sym", "venue", "tag"}
    texts = [tuple(registry.strings.text(columns[a][0]) for a in ("sym", "venue", "tag"))]
    assert texts == [("AAPL", "NYSE", 'pair "1"')]
    row = registry.batch("Pair", ts=columns["ts"], sym="AAPL", venue="NYSE", tag='pair "1"')
    assert decode_event(encode_event(row[0], registry), registry)["tag"] == 'pair "1"'


def test_builder_takes_string_literals():
    from specula.detectors.rules.builder import ne, rule

    built = rule("S").when("Q", sym="AAPL", ex=ne("")).build()
    assert built.terminator == parse_rule('define S() from Q(sym = "AAPL" and ex != "")').terminator
