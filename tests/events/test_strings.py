"""String payload fields: declared ``str``, stored as stable int64 codes, read back as
text through the registry and the msgpack codec."""

from __future__ import annotations

import numpy as np
import pytest

from specula.events import (
    InvalidEvent,
    TypeRegistry,
    batch_registry,
    decode_batch,
    decode_event,
    encode_batch,
    encode_event,
)
from specula.events import strings as strings_module
from specula.events.strings import MAX_CODE, StringTable, string_code


def quotes() -> TypeRegistry:
    registry = TypeRegistry()
    registry.register("Q", sym=str, px="f8")
    return registry


def test_codes_are_stable_exact_in_float64_and_zero_for_the_empty_text():
    assert string_code("") == 0
    codes = [string_code(t) for t in ("AAPL", "AMZN", "naïve", 'a"b')]
    assert len(set(codes)) == 4 and all(0 < c <= MAX_CODE for c in codes)
    assert all(float(c) == c for c in codes)
    assert string_code("AAPL") == codes[0]  # a function of the text alone


def test_registry_stores_codes_and_refuses_what_is_not_a_string():
    registry = quotes()
    assert registry["Q"].strings == {"sym"} and registry["Q"].fields[0][1] == np.int64
    batch = registry.from_records([{"type": "Q", "ts": 1, "sym": "AAPL"},
                                   {"type": "Q", "ts": 2}])
    assert batch["sym"].tolist() == [string_code("AAPL"), 0]
    assert [registry.strings.text(c) for c in batch["sym"]] == ["AAPL", ""]
    assert registry.batch("Q", ts=[1, 2], sym=["A", "B"])["sym"].tolist() == [
        string_code("A"), string_code("B")]
    with pytest.raises(InvalidEvent, match=r"record 0, field 'sym': not a string \(3\)"):
        registry.from_records([{"type": "Q", "ts": 1, "sym": 3}])
    with pytest.raises(ValueError, match="has dtype int64, but event type 'Q' declares it "
                                         "as str"):
        registry.register("R", sym="i8")
    other = TypeRegistry()
    other.register("Q", sym="i8", px="f8")
    assert other.fingerprint() != registry.fingerprint()


def test_two_texts_with_one_code_are_refused(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(strings_module, "string_code", lambda text: 7 if text else 0)
    table = StringTable()
    table.intern("x")
    with pytest.raises(ValueError, match="the texts 'x' and 'y' have the same code 7"):
        table.intern("y")


def test_codec_carries_texts_with_events_and_batches():
    registry = quotes()
    batch = registry.from_records([{"type": "Q", "ts": 1, "sym": "naïve \"q\"", "px": 2.5},
                                   {"type": "Q", "ts": 2, "sym": ""}])
    event = decode_event(encode_event(batch[0], registry), registry)
    assert event["sym"] == 'naïve "q"' and event["px"] == 2.5
    data = encode_batch(batch, registry)
    read = batch_registry(data)
    assert read is not None and read.fingerprint() == registry.fingerprint()
    assert [read.strings.text(c) for c in decode_batch(data)["sym"]] == ['naïve "q"', ""]
