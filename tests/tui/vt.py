"""A minimal terminal screen for pty tests: enough of VT100 for what Textual writes (cursor
positioning, carriage return, line feed, printable text; colours and modes are skipped), so a
test can read the cells a user would see instead of searching the raw byte stream."""

from __future__ import annotations

import re

CSI = re.compile(r"\x1b\[([0-?]*)([ -/]*)([@-~])")
OSC = re.compile(r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
OTHER_ESC = re.compile(r"\x1b[()][0-9A-Za-z]|\x1b[=>78c]")


class Screen:
    def __init__(self, cols: int, rows: int) -> None:
        self.resize(cols, rows)

    def resize(self, cols: int, rows: int) -> None:
        """A blank screen of the new size (the application repaints every cell after SIGWINCH)."""
        self.cols, self.rows = cols, rows
        self.cells = [[" "] * cols for _ in range(rows)]
        self.x = self.y = 0
        self._pending = ""

    def feed(self, data: str) -> None:
        data = OTHER_ESC.sub("", OSC.sub("", self._pending + data))
        # An escape sequence cut at the end of a read waits for the rest.
        cut = data.rfind("\x1b")
        if cut >= 0 and not CSI.match(data, cut) and len(data) - cut < 32:
            data, self._pending = data[:cut], data[cut:]
        else:
            self._pending = ""
        pos = 0
        for m in CSI.finditer(data):
            self._text(data[pos:m.start()])
            params, final = m.group(1), m.group(3)
            if final == "H" and not params.startswith("?"):
                parts = [int(p) if p else 1 for p in params.split(";")] if params else [1, 1]
                self.y, self.x = parts[0] - 1, (parts[1] if len(parts) > 1 else 1) - 1
            pos = m.end()
        self._text(data[pos:])

    def _text(self, text: str) -> None:
        for ch in text:
            if ch == "\r":
                self.x = 0
            elif ch == "\n":
                self.y += 1
            elif ch >= " " and ch != "\x7f":
                if 0 <= self.y < self.rows and 0 <= self.x < self.cols:
                    self.cells[self.y][self.x] = ch
                self.x += 1

    def line(self, y: int) -> str:
        return "".join(self.cells[y])

    @property
    def text(self) -> str:
        return "\n".join(self.line(y) for y in range(self.rows))
