"""`evotui bench-db`: the same run with LLM texts off and on, measured side by side."""

import json
from pathlib import Path

from tests.e2e.conftest import evotui


def test_bench_db_measures_the_run_with_texts_off_and_on(tmp_path: Path) -> None:
    res = evotui("bench-db", "--proposals", "3", "--dir", str(tmp_path), "--json")
    assert res.returncode == 0, res.stderr[-2000:]
    off, on = (json.loads(line) for line in res.stdout.strip().splitlines())
    assert (off["keep_llm_text"], on["keep_llm_text"]) == (False, True)
    assert off["calls_with_text"] == off["blobs"] == off["blob_bytes_stored"] == 0
    assert on["calls_with_text"] == on["llm_calls"] > 0 and on["blobs"] > 0
    assert on["text_bytes_referenced"] >= on["text_bytes_unique"] > 0 and on["dedup_ratio"] >= 1
    # Mode sync: the same calls in both runs, so the difference is the texts alone.
    assert off["llm_calls"] == on["llm_calls"] and on["db_bytes"] > off["db_bytes"]


def test_bench_db_refuses_a_missing_directory(tmp_path: Path) -> None:
    res = evotui("bench-db", "--dir", str(tmp_path / "nope"))
    assert res.returncode == 2 and "is not a directory" in res.stderr
