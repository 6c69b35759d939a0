"""The closing line says the JSON's numbers (D11): proposals as the summary's `proposals` (the
attempts apart when they differ), and stale discards and superseded heads when there are any."""

from __future__ import annotations

from evotui.headless import closing_line

SUMMARY = {"status": "completed", "best_score": 0.5, "best_id": "a000007", "seed_score": 0.1,
           "proposals": 39, "proposal_attempts": 40, "accepted": 30, "rejected": 0, "failed": 5,
           "discarded_stale": 0, "superseded": 4, "llm_calls": 80, "wall_s": 3.0, "strategy": "openevolve"}


def test_proposals_are_the_json_proposals_and_attempts_are_said_apart() -> None:
    line = closing_line(SUMMARY)
    assert "after 39 proposals (40 attempts);" in line
    assert closing_line({**SUMMARY, "proposal_attempts": 39}).count("attempts") == 0


def test_superseded_and_stale_are_counted_when_present() -> None:
    line = closing_line(SUMMARY)
    assert "30 accepted, 0 rejected, 5 failed, 4 superseded;" in line
    both = closing_line({**SUMMARY, "discarded_stale": 2})
    assert "5 failed, 2 stale, 4 superseded;" in both
    assert "superseded" not in closing_line({**SUMMARY, "superseded": 0})
