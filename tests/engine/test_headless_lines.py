"""Headless output: progress lines that fit 80 columns, merges apart, one closing human line."""

from __future__ import annotations

from dataclasses import replace

from evotui.headless import closing_line, progress_line
from tests.tui.fakes import frozen_snapshot


def test_the_compact_progress_line_fits_80_columns_even_with_big_figures() -> None:
    big = replace(frozen_snapshot(), elapsed_s=99999.4, state="draining", pool_version=9999, proposal_attempts=9999,
                  accepted=9999, rejected=9999, failed=999, merges_accepted=99, best_score=0.98765)
    line = progress_line(big, width=80)
    assert len(line) <= 80, (len(line), line)
    assert "merges 99" in line and "acc 9999" in line and "q depth" not in line  # a day-long 10k-proposal run


def test_the_wide_line_adds_queues_llm_use_and_the_simulated_label() -> None:
    line = progress_line(frozen_snapshot(), width=200)
    assert line.startswith(progress_line(frozen_snapshot(), width=80))
    assert "q depth/busy/workers rollout:3/8/8" in line and "llm 633 calls" in line and "[SIMULATED]" in line
    assert "chains" not in line
    chain = replace(frozen_snapshot(), mode="chain", chain_count=8, chains_min=8, chains_max=8, chains_running=7)
    assert progress_line(chain, width=200).endswith("tok | chains running/count 7/8")
    before = replace(chain, chain_count=6, chains_min=6, chains_running=0)  # the snapshot's floor before admission
    assert progress_line(before, width=200).endswith("tok | chains running/count 0/6")


def test_the_closing_line_names_the_outcome_and_counts_merges_apart() -> None:
    summary = {"status": "completed", "best_score": 0.8123, "best_id": "a000042", "seed_score": 0.03,
               "proposals": 48, "proposal_attempts": 48, "merges_tried": 5, "merges_accepted": 2, "accepted": 20, "rejected": 25,
               "failed": 3, "llm_calls": 1234, "wall_s": 12.34, "simulated": True, "strategy": "gepa"}
    line = closing_line(summary)
    assert line == ("evotui: completed: best 0.812 (a000042, seed 0.030) after 48 proposals and 2 of 5 merges; "
                    "20 accepted, 25 rejected, 3 failed; 1234 LLM calls in 12.3 s (simulated); strategy gepa")
    assert "merges" not in closing_line({**summary, "merges_tried": 0})
