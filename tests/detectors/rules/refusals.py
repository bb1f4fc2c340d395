"""What the rule tests check word for word: the message a refused rule gets."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from specula.detectors.rules import RuleError, parse_rule


def refused(text: str, build: Callable[[str], object] = parse_rule) -> str:
    """The message of the :class:`RuleError` that ``build(text)`` raises (parsing the
    text by default); the test fails if it raises none."""
    with pytest.raises(RuleError) as info:
        build(text)
    return str(info.value)
