"""The managed llama.cpp server's readiness line is found even when llama.cpp's own logging thread
wrote the start of that line first (seen in CI: the start-up then waited for its whole timeout)."""

from types import SimpleNamespace

from engine.llm.local import LocalServer
from engine.llm.local_launcher import ERROR_PREFIX, READY_PREFIX


def _server(lines):
    return SimpleNamespace(_log_lines=lambda: lines)


def test_ready_line_interleaved_with_llama_cpp_logging_counts():
    interleaved = [f"0.00.431.572 {READY_PREFIX}http://127.0.0.1:43995I srv    load_model: initializing, n_slots = 2"]
    assert LocalServer._launcher_ready(_server(interleaved))
    assert not LocalServer._launcher_ready(_server(["0.00.005.271 I srv          init: loading model"]))


def test_an_error_line_after_llama_cpp_output_is_still_ours():
    lines = [f"0.00.100.000 I srv init {ERROR_PREFIX}llama.cpp server failed to start (boom)"]
    assert LocalServer._startup_failure(SimpleNamespace(_log_lines=lambda: lines, model="m.gguf", log_path="x"), 1) == \
        "llama.cpp server failed to start (boom)"
