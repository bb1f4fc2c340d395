"""String payload fields: texts stored as stable integer codes.

Payload columns stay numeric, so every kernel (ordering, rule engines on CPU and GPU)
keeps working on int64 columns. A field declared ``str`` (``registry.register("Quote",
sym=str, price="f8")``) holds, in its int64 column, the *code* of each text:
:func:`string_code`, a hash of the text's UTF-8 bytes into ``[1, 2**53)``, with ``""``
coded 0 (so a zero-filled column reads as empty strings). The code depends on the text
alone, not on a dictionary built in some order, so every process, registry and run
gives a text the same code: equality of texts is equality of codes, batches travel
between processes without translation, and codes are exact in float64 (where the rule
engines evaluate predicates).

Reading a code back as text needs the texts seen: every registry keeps a
:class:`StringTable` that interns each text it encodes (``batch``, ``from_records``,
the codec); two texts with one code (probability about ``n**2 / 2**54`` for ``n``
distinct texts) are refused there, not silently merged.

>>> string_code(""), string_code("AAPL") == string_code("AAPL"), 0 < string_code("A") < 2**53
(0, True, True)
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

import numpy as np

__all__ = ["MAX_CODE", "STRING_SPECS", "StringTable", "is_string_spec", "string_code"]

MAX_CODE = 2**53 - 1
"""The largest code: every code is an integer float64 represents exactly."""
STRING_SPECS = (str, "str", "string")
"""How a payload field is declared a string field."""


def is_string_spec(spec: Any) -> bool:
    """Whether ``spec`` (a field's dtype argument of ``register``) declares a string."""
    return spec is str or (isinstance(spec, str) and spec.lower() in ("str", "string"))


def string_code(text: str) -> int:
    """The code of ``text``: 0 for ``""``, else a hash of its UTF-8 bytes in
    ``[1, MAX_CODE]``."""
    if not text:
        return 0
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return 1 + int.from_bytes(digest, "little") % MAX_CODE


class StringTable:
    """The texts a registry has encoded, by code."""

    def __init__(self) -> None:
        self._texts: dict[int, str] = {0: ""}

    def intern(self, text: Any) -> int:
        """The code of ``text``, remembered; ValueError if it is not a string or another
        text has its code."""
        if not isinstance(text, str):
            raise ValueError(f"not a string ({text!r})"[:80])
        code = string_code(text)
        known = self._texts.setdefault(code, text)
        if known != text:
            raise ValueError(f"the texts {known!r} and {text!r} have the same code {code}; "
                             "rename one")
        return code

    def codes(self, texts: Iterable[Any]) -> np.ndarray:
        """The codes of ``texts``, interned, as an int64 array."""
        return np.array([self.intern(t) for t in texts], dtype=np.int64)

    def text(self, code: int) -> str:
        """The text of ``code``; KeyError if this table never encoded it."""
        try:
            return self._texts[int(code)]
        except KeyError:
            raise KeyError(f"string code {int(code)} is not known to this registry; "
                           "intern its text first") from None

    def items(self, codes: Iterable[int]) -> list[tuple[int, str]]:
        """``(code, text)`` of each distinct code in ``codes`` but 0, ascending."""
        return [(c, self.text(c)) for c in sorted({int(c) for c in codes} - {0})]

    def __len__(self) -> int:
        return len(self._texts)
