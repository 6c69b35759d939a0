"""`--llm local` input errors need no model: one line, exit 2, no server left behind."""

from tests.e2e.conftest import evotui


def test_llm_local_with_missing_model_is_a_one_line_input_error(db, tmp_path):
    res = evotui("run", "rules", "--no-ui", "--llm", "local", "--llm-model-path", str(tmp_path / "none.gguf"),
                 "--db", str(db), "--quiet")
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "none.gguf not found" in lines[0] and lines[0].startswith("evotui: error:")


def test_llm_local_and_llm_url_exclude_each_other(db):
    res = evotui("run", "rules", "--no-ui", "--llm", "local", "--llm-url", "http://127.0.0.1:9/v1", "--db", str(db))
    assert res.returncode == 2 and "exclude each other" in res.stderr


def test_local_serve_rejects_a_non_gguf_model(tmp_path):
    junk = tmp_path / "junk.gguf"
    junk.write_text("hello")
    res = evotui("local", "serve", "--model-path", str(junk), "--port", "0")
    assert res.returncode == 2 and "is not a GGUF file" in res.stderr
