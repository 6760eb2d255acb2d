"""Capping output: keep the head and the tail, say how much was left out.

``HeadTail`` takes bytes as they arrive and holds at most ``head + 2 × tail`` of them,
whatever the total, so a command printing 100 MB costs a few KB of memory.
"""

from __future__ import annotations

OMITTED = "[… {n} bytes omitted …]"
_MARKER_ROOM = 48  # the marker line with a 20-digit count, and its newlines


class HeadTail:
    def __init__(self, limit: int) -> None:
        self.limit = max(limit, 128)
        kept = self.limit - _MARKER_ROOM  # so that head, marker line and tail fit in limit
        self.head_limit = kept // 2
        self.tail_limit = kept - self.head_limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > 2 * self.tail_limit:
                del self.tail[: len(self.tail) - self.tail_limit]

    @property
    def truncated(self) -> bool:
        return self.total > self.head_limit + self.tail_limit

    def text(self) -> str:
        if not self.truncated:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", errors="replace")
        tail = bytes(self.tail[-self.tail_limit:])
        omitted = self.total - len(self.head) - len(tail)
        head_text = bytes(self.head).decode("utf-8", errors="replace")
        tail_text = tail.decode("utf-8", errors="replace")
        return (head_text.rstrip("\n") + "\n" + OMITTED.format(n=omitted) + "\n"
                + tail_text.lstrip("\n"))


def cap_text(text: str, limit: int) -> tuple[str, bool]:
    """``text`` within ``limit`` bytes (head and tail kept); whether it was cut."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text, False
    buf = HeadTail(limit)
    buf.feed(data)
    return buf.text(), True
