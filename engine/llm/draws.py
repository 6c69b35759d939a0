"""Draw keys: what makes a simulated reply a function of the run, not of the order requests arrive in.

Every chat request carries an ``X-Evotui-Draw`` header, a hash of (the run's salt, the item the
call belongs to, the endpoint, the stage, the messages, and how many identical requests this item
made before). The simulator seeds a request's randomness (its reply and its length) from that key
alone when it is present, so a killed-and-resumed run, whose interrupted item runs its stages
again from their start, gets the replies the uninterrupted run got. Real servers ignore the header.

The identical-request counter is per item: calls outside any item (the seed's evaluation) share
one scope, which is fine because they run once per run.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import OrderedDict

from engine.items import current_item

DRAW_HEADER = "X-Evotui-Draw"
MAX_SCOPES = 4096
"""Items whose counters are kept; the oldest are forgotten (an item does not come back once done)."""


SCRATCH_PATH = re.compile(r"[^\s\"'|:]*evotui-eval-[^/\s\"'|]*")
"""An evaluation's scratch folder (engine/sandbox/core.py), named by PID and random letters: it
reaches the proposer in a failed child's stderr, and must not change the key."""


def messages_digest(messages: list[dict]) -> str:
    text = SCRATCH_PATH.sub("<scratch>", json.dumps(messages, sort_keys=True, ensure_ascii=False, default=str))
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


class DrawKeys:
    """Issues one draw key per request; a key depends on no wall clock and no arrival order."""

    def __init__(self, salt: str = "") -> None:
        self.salt = salt
        self._seen: OrderedDict[str, dict[tuple[str, str, str], int]] = OrderedDict()

    def key(self, endpoint: str, stage: str, messages: list[dict]) -> str:
        scope = current_item.get() or "-"
        counts = self._seen.get(scope)
        if counts is None:
            counts = self._seen[scope] = {}
            while len(self._seen) > MAX_SCOPES:
                self._seen.popitem(last=False)
        digest = messages_digest(messages)
        n = counts.get((endpoint, stage, digest), 0)
        counts[(endpoint, stage, digest)] = n + 1
        raw = f"{self.salt}/{scope}/{endpoint}/{stage}/{digest}/{n}"
        return hashlib.blake2b(raw.encode(), digest_size=16).hexdigest()
