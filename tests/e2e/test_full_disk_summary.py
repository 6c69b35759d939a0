"""After a full disk the summary reports what the database holds, not what the session counted."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

from tests.e2e.conftest import FAST, ROOT, read_rows, summary_of


def test_the_summary_after_a_full_disk_agrees_with_the_database(db: Path) -> None:
    def small_files() -> None:  # the database cannot grow past 1.5 MB: a disk that fills mid-run
        resource.setrlimit(resource.RLIMIT_FSIZE, (1_500_000, 1_500_000))

    proc = subprocess.run([sys.executable, "-m", "evotui.cli", "run", "rules", "--no-ui", "--db", str(db),
                           "--max-proposals", "200", *FAST], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, preexec_fn=small_files)
    assert proc.returncode == 5, proc.stderr[-3000:]
    s = summary_of(proc)
    assert s["counts_from"] == "database"
    charged = dict(read_rows(db, "SELECT json_extract(payload_json, '$.proposal') AS kind, count(*) FROM items "
                                 "WHERE kind IS NOT NULL GROUP BY kind"))
    assert s["proposals"] == charged.get("made", 0) and s["proposal_attempts"] == sum(charged.values())
    assert s["llm_calls"] == read_rows(db, "SELECT count(*) FROM llm_calls")[0][0]
    assert s["pool_version"] == read_rows(db, "SELECT coalesce(max(version), 0) FROM pool_events")[0][0]
    assert s["best_id"] in {a for (a,) in read_rows(db, "SELECT artifact_id FROM artifacts")}
    # The closing line says the same numbers.
    assert f"after {s['proposals']} proposals" in proc.stderr
    assert f"{s['llm_calls']} LLM calls" in proc.stderr
