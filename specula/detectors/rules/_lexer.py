"""Tokens of the rule syntax: the tokenizer, a cursor over its tokens, and the error type.

:mod:`~specula.detectors.rules.parser` reads a rule's text in two stages; this module is
the first. :func:`tokenize` cuts the text into names, numbers, ``"strings"``, ``$parameters``
and operators, dropping blanks and ``#`` comments, and remembers where each token starts so
that every error can name its line and column. :class:`TokenStream` is the cursor the
recursive-descent parser moves over those tokens: it peeks, consumes, and turns "expected
X" into a :class:`RuleSyntaxError` at the current token. Nothing here knows the grammar.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from specula.detectors.rules.ast import RuleError

__all__ = ["RuleSyntaxError", "Token", "TokenStream", "number", "string", "tokenize"]


class RuleSyntaxError(RuleError):
    """A rule text that does not parse, or describes an inconsistent rule.

    Parameters
    ----------
    line, column : int
        Where the problem is (both 1-based).
    reason : str
        What is wrong, e.g. ``"expected 'within', found 'from'"``.
    """

    def __init__(self, line: int, column: int, reason: str) -> None:
        self.line = line
        self.column = column
        self.reason = reason
        super().__init__(f"line {line}, column {column}: {reason}")

    def __reduce__(self) -> tuple[type[RuleSyntaxError], tuple[int, int, str]]:
        return (type(self), (self.line, self.column, self.reason))


def located(exc: RuleError, text: str, start: int = 0, end: int | None = None
            ) -> RuleSyntaxError:
    r"""``exc``, raised about the rule ``text[start:end]``, with the line and column (in
    ``text``) of the place it names (:attr:`RuleError.near`), else of the rule's start.

    >>> exc = RuleError("rule R: no attribute 'y'", near=("where", "y"))
    >>> str(located(exc, "define R(y: int)\nfrom A()\nwhere y = 1"))
    "line 3, column 7: rule R: no attribute 'y'"
    """
    end = len(text) if end is None else end
    at, offset = start, start
    for word in exc.near:
        before = r"(?<![\w$])" if re.match(r"[\w$]", word) else ""  # whole names only
        after = r"(?!\w)" if re.search(r"\w$", word) else ""
        found = re.compile(before + re.escape(word) + after).search(text, offset, end)
        if found is None:
            at = start
            break
        at, offset = found.start(), found.end()
    line = text.count("\n", 0, at) + 1
    return RuleSyntaxError(line, at - (text.rfind("\n", 0, at) + 1) + 1, str(exc))


@dataclass(frozen=True)
class Token:
    """One token, with where it starts (``line``, ``column``) and its span in the text."""

    kind: str  # "name", "number", "string", "param", "op" or "end"
    text: str
    line: int
    column: int
    start: int
    end: int

    def describe(self) -> str:
        return "end of text" if self.kind == "end" else repr(self.text)


_TOKEN = re.compile(r"""
    (?P<skip>[ \t\r\f\v]+|\#[^\n]*)
  | (?P<newline>\n)
  | (?P<number>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<param>\$[A-Za-z_]\w*)
  | (?P<name>[A-Za-z_]\w*)
  | (?P<op><=|>=|!=|[=<>(),:.+\-*/\[\]{}|&?])
""", re.VERBOSE)


#: The longest number token: far beyond any int64 or float64, far below int()'s limit.
MAX_NUMBER_LENGTH = 400


def tokenize(text: str) -> list[Token]:
    """The tokens of ``text``, ending with one of kind ``"end"``."""
    tokens: list[Token] = []
    line, line_start, pos = 1, 0, 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        column = pos - line_start + 1
        if match is None:
            reason = (f"expected a parameter name after '$', found {text[pos:pos + 2]!r}"
                      if text[pos] == "$" else
                      "a string that does not end on its line (close it with '\"')"
                      if text[pos] == '"' else f"unexpected character {text[pos]!r}")
            raise RuleSyntaxError(line, column, reason)
        kind = match.lastgroup
        assert kind is not None  # every alternative of _TOKEN is a named group
        if kind == "number" and len(match.group()) > MAX_NUMBER_LENGTH:
            # int() refuses more than sys.get_int_max_str_digits() digits (4300) with a
            # plain ValueError; no window, count or value needs a fraction of these
            raise RuleSyntaxError(line, column, f"a number of {len(match.group())} "
                                  f"characters; at most {MAX_NUMBER_LENGTH} are allowed")
        if kind == "newline":
            line, line_start = line + 1, match.end()
        elif kind != "skip":
            tokens.append(Token(kind, match.group(), line, column, pos, match.end()))
        pos = match.end()
    tokens.append(Token("end", "", line, pos - line_start + 1, pos, pos))
    return tokens


class TokenStream:
    """A cursor over the tokens of ``text``, with the error reporting of the parser."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.pos = 0

    def peek(self, ahead: int = 0) -> Token:
        return self.tokens[min(self.pos + ahead, len(self.tokens) - 1)]

    def advance(self) -> Token:
        token = self.peek()
        self.pos = min(self.pos + 1, len(self.tokens) - 1)
        return token

    def at_end(self) -> bool:
        return self.peek().kind == "end"

    def at_keyword(self, *words: str, ahead: int = 0) -> bool:
        token = self.peek(ahead)
        return token.kind == "name" and token.text.lower() in words

    def at_op(self, *ops: str, ahead: int = 0) -> bool:
        token = self.peek(ahead)
        return token.kind == "op" and token.text in ops

    def fail(self, expected: str, token: Token | None = None) -> RuleSyntaxError:
        token = token or self.peek()
        return RuleSyntaxError(token.line, token.column,
                               f"expected {expected}, found {token.describe()}")

    def expect_keyword(self, word: str) -> Token:
        if not self.at_keyword(word):
            raise self.fail(repr(word))
        return self.advance()

    def expect_op(self, op: str) -> Token:
        if not self.at_op(op):
            raise self.fail(repr(op))
        return self.advance()

    def expect_name(self, what: str) -> Token:
        if self.peek().kind != "name":
            raise self.fail(what)
        return self.advance()

    def expect_end(self, expected: str) -> None:
        if not self.at_end():
            raise self.fail(expected)


_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t", "r": "\r"}


def string(token: Token) -> str:
    """The text of a string token: between its quotes, with ``\\"``, ``\\\\``,
    ``\\n``, ``\\t``, ``\\r`` and ``\\uXXXX`` replaced.

    >>> string(tokenize(r'"a\\"b\\u00e9"')[0])
    'a"bé'
    """
    out, body, i = [], token.text[1:-1], 0
    while i < len(body):
        char = body[i]
        i += 1
        if char != "\\":
            out.append(char)
            continue
        escape = body[i]
        if escape == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", body[i + 1:i + 5]):
            out.append(chr(int(body[i + 1:i + 5], 16)))
            i += 5
            continue
        if escape not in _ESCAPES:
            raise RuleSyntaxError(token.line, token.column + i,
                                  f"unknown escape '\\{escape}' in a string; use \\\", "
                                  "\\\\, \\n, \\t, \\r or \\uXXXX")
        out.append(_ESCAPES[escape])
        i += 1
    return "".join(out)


def number(text: str) -> int | float:
    """The value of a number token: an int unless it has a fraction or an exponent."""
    return float(text) if any(c in text for c in ".eE") else int(text)
