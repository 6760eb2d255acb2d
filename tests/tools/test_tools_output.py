"""Head-and-tail capping: nothing is dropped without the marker saying how much."""

from __future__ import annotations

import pytest

from hermes_tui.tools.output import HeadTail, cap_text


@pytest.mark.parametrize("limit", [128, 200, 1000])
@pytest.mark.parametrize("size", [0, 1, 40, 87, 88, 89, 127, 128, 129, 500, 5000])
def test_every_byte_is_kept_or_counted(limit, size):
    data = bytes(ord("a") + i % 26 for i in range(size))
    buf = HeadTail(limit)
    for i in range(0, size, 7):  # in pieces, as a pipe delivers them
        buf.feed(data[i:i + 7])
    text = buf.text()
    assert buf.total == size
    assert len(text.encode()) <= limit
    if not buf.truncated:
        assert text == data.decode()
    else:
        head, marker, tail = text.split("\n")
        omitted = int(marker.removeprefix("[… ").removesuffix(" bytes omitted …]"))
        assert data.startswith(head.encode()) and data.endswith(tail.encode())
        assert len(head) + omitted + len(tail) == size


def test_cap_text_leaves_short_text_alone():
    assert cap_text("short", 1000) == ("short", False)
    capped, cut = cap_text("x" * 5000, 500)
    assert cut and len(capped.encode()) <= 500
