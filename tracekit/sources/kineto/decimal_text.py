"""Microsecond numbers, as the JSON text wrote them, to exact integer nanoseconds.

torch.profiler writes ``ts`` and ``dur`` in microseconds: integers in older traces, decimals with
nanosecond digits in newer ones ("1712195495519689.047"). A float64 has 53 bits: at today's epoch
microseconds its step is 0.25 µs, so parsing through a float moves events by up to 125 ns. Here the
text itself is read as a decimal with three fractional digits (Arrow's string-to-decimal cast, in C,
~60 ns a number); digits past the nanosecond are dropped (truncated toward zero).
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

NS_DECIMAL = pa.decimal128(38, 3)  # the unscaled integer of a value with three decimals is its nanoseconds
INT64_MAX = 2**63 - 1


def microseconds_to_ns(texts: list) -> tuple[np.ndarray, np.ndarray]:
    """Nanoseconds (int64) of each JSON number text (bytes-like) in µs, and a mask of the usable
    ones: empty (the field was absent), non-numeric, or beyond int64 nanoseconds are unusable (0)."""
    count = len(texts)
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=count)
    offsets = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = b"".join(texts)
    strings = pa.LargeStringArray.from_buffers(count, pa.py_buffer(offsets), pa.py_buffer(data))
    present = lengths > 0
    try:
        if not present.all():
            strings = pc.if_else(  # pyright: ignore[reportAttributeAccessIssue]  (generated at import)
                pa.array(present), strings, pa.scalar("0", pa.large_string())
            )
        decimals = strings.cast(NS_DECIMAL, safe=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # text that is not a number: one at a time
        return _one_by_one(texts)
    words = np.frombuffer(decimals.buffers()[1], dtype=np.int64, count=2 * count)
    low, high = words[0::2], words[1::2]
    fits = high == (low >> 63)  # the 128-bit value is a sign-extended int64
    usable = present & fits
    return np.where(usable, low, 0), usable


def _one_by_one(texts: list) -> tuple[np.ndarray, np.ndarray]:
    values = np.zeros(len(texts), dtype=np.int64)
    usable = np.zeros(len(texts), dtype=bool)
    for index, text in enumerate(texts):
        nanoseconds = _nanoseconds(bytes(text))
        if nanoseconds is not None:
            values[index], usable[index] = nanoseconds, True
    return values, usable


def _nanoseconds(text: bytes) -> int | None:
    """Exact integer arithmetic on the decimal's digits: no context precision to round with, and an
    exponent past int64 nanoseconds is refused before any big number is built."""
    try:
        value = Decimal(text.decode("ascii"))
    except (InvalidOperation, UnicodeDecodeError, ValueError):
        return None
    if not value.is_finite():
        return None
    if value.is_zero() or value.adjusted() < -4:
        return 0  # below a nanosecond
    if value.adjusted() > 16:  # 10^17 µs is past int64 nanoseconds (9.2e18)
        return None
    sign, digits, exponent = value.as_tuple()
    shift = int(exponent) + 3  # of the digits, to nanoseconds
    number = int("".join(map(str, digits)))
    nanoseconds = number * 10**shift if shift >= 0 else number // 10**-shift  # truncated toward zero
    nanoseconds = -nanoseconds if sign else nanoseconds
    return nanoseconds if -INT64_MAX <= nanoseconds <= INT64_MAX else None
