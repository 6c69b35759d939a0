"""Recorded answers served again: the simulator's timing for a real model's replies.

`evotui sim-calibrate --check` compares the modes' throughput on a real server with the
simulator's prediction. The two sides must do the same work: a small real model's proposals are
mostly unusable (rejected before any evaluation) while the simulator's are usable (evaluated,
validated, accepted), so the two sides would run different pipelines. A ReplayBook holds the
real runs' replies keyed by their request's messages; a request with the same messages gets the
recorded reply, its recorded prompt and completion token counts and finish reason, in recording
order for repeats (a rollout of one prompt on one example sent several times). The serving model
alone decides when it arrives. A request that was never recorded gets the simulator's own answer
and counts as missed (the check reports the matched share).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable

from engine.llm.sim.plugins import message_text


@dataclass(frozen=True)
class Recorded:
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str


def request_key(messages: list[dict[str, Any]]) -> str:
    """Roles and texts of a request's messages: what decides a reply (not the wire form of content)."""
    return json.dumps([(m.get("role"), message_text(m.get("content"))) for m in messages], ensure_ascii=False)


class ReplayBook:
    def __init__(self, calls: Iterable[tuple[list[dict[str, Any]], Recorded]]) -> None:
        self._replies: dict[str, list[Recorded]] = {}
        for messages, rec in calls:
            self._replies.setdefault(request_key(messages), []).append(rec)
        self._served: dict[str, int] = {}  # per key: replies served so far
        self.matched = self.missed = 0

    def __len__(self) -> int:
        return sum(len(v) for v in self._replies.values())

    def take(self, messages: list[dict[str, Any]]) -> Recorded | None:
        """The next recorded reply to these messages; once they are used up, they are served again
        from the first (a simulated run may ask a request more often than the real one did)."""
        key = request_key(messages)
        replies = self._replies.get(key)
        if replies is None:
            self.missed += 1
            return None
        n = self._served.get(key, 0)
        self._served[key] = n + 1
        self.matched += 1
        return replies[n % len(replies)]

    def figures(self) -> dict[str, int]:
        return {"replay_recorded": len(self), "replay_matched": self.matched, "replay_missed": self.missed}
