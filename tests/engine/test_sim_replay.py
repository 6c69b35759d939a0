"""ReplayBook: recorded replies served to the requests they answered (engine/llm/sim/replay.py)."""

from engine.llm.sim.replay import Recorded, ReplayBook, request_key


def _msgs(system: str, user: str) -> list[dict]:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def test_a_request_gets_its_recorded_replies_in_order_then_again_from_the_first():
    a, b = Recorded("first", 10, 3, "stop"), Recorded("second", 10, 5, "length")
    book = ReplayBook([(_msgs("s", "u"), a), (_msgs("s", "other"), Recorded("x", 9, 1, "stop")), (_msgs("s", "u"), b)])
    assert len(book) == 3
    assert [book.take(_msgs("s", "u")) for _ in range(3)] == [a, b, a]
    assert book.take(_msgs("s", "never sent")) is None
    assert book.figures() == {"replay_recorded": 3, "replay_matched": 3, "replay_missed": 1}


def test_the_key_is_roles_and_texts_not_the_wire_form():
    parts = [{"role": "user", "content": [{"type": "text", "text": "hello"}]}]
    assert request_key(parts) == request_key([{"role": "user", "content": "hello"}])
    assert request_key(_msgs("a", "b")) != request_key(_msgs("b", "a"))
    assert request_key([{"role": "user", "content": "b"}]) != request_key([{"role": "system", "content": "b"}])
