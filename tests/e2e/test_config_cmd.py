"""`evotui config schema` and `evotui config show` as a user runs them."""

from __future__ import annotations

import json
import tomllib

import jsonschema
import pytest

from tests.e2e.conftest import ROOT, evotui

EXAMPLES = sorted((ROOT / "examples" / "configs").glob("*.toml"))
TASK_DEFAULTS = [p for p in sorted((ROOT / "tasks").glob("*/task.toml")) if "defaults" in tomllib.loads(p.read_text())]


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    proc = evotui("config", "schema")
    assert proc.returncode == 0, proc.stderr
    schema = json.loads(proc.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_examples_exist():
    assert len(EXAMPLES) >= 3 and TASK_DEFAULTS


@pytest.mark.parametrize("path", EXAMPLES + TASK_DEFAULTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_schema_validates_shipped_configs(validator, path):
    data = tomllib.loads(path.read_text())
    validator.validate(data.get("defaults", data) if path.name == "task.toml" else data)


def test_schema_rejects_a_misspelled_key(validator):
    data = tomllib.loads((ROOT / "examples" / "configs" / "async-guarded.toml").read_text())
    data["pipeline"]["max_in_flite"] = 8
    errors = list(validator.iter_errors(data))
    assert any("max_in_flite" in e.message for e in errors), [e.message for e in errors]
    assert list(validator.iter_errors({"tracking": {"wandb": {"mode": "sometimes"}}}))


def test_show_names_each_values_layer(tmp_path):
    cfg = tmp_path / "run.toml"
    cfg.write_text('[pipeline]\nmode = "pxn"\nminibatch_size = 5\n[budget]\nmax_proposals = 9\n')
    proc = evotui("config", "show", "--config", str(cfg), "--max-proposals", "13", "--json",
                  env={"EVOTUI_PIPELINE__MODE": "sync", "EVOTUI_PIPELINE__MAX_IN_FLIGHT": "3"})
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout)
    assert shown["pipeline.mode"] == {"value": "sync", "source": "environment variable EVOTUI_PIPELINE__MODE"}
    assert shown["pipeline.max_in_flight"]["source"] == "environment variable EVOTUI_PIPELINE__MAX_IN_FLIGHT"
    assert shown["pipeline.minibatch_size"] == {"value": 5, "source": str(cfg)}
    assert shown["budget.max_proposals"] == {"value": 13, "source": "command line"}
    assert shown["seed"] == {"value": 0, "source": "default"}


def test_show_with_a_task_includes_its_defaults():
    proc = evotui("config", "show", "circle_packing")
    assert proc.returncode == 0, proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("budget.max_proposals = "))
    assert line.split("#")[1].strip() == "defaults of task.toml" and "= 60" in line


def test_show_redacts_credentials_in_urls():
    proc = evotui("config", "show", "--llm-url", "http://user:s3cret@127.0.0.1:9/v1")
    assert proc.returncode == 0, proc.stderr
    assert "s3cret" not in proc.stdout and "task_llm.url" in proc.stdout


@pytest.mark.parametrize("env, expect", [
    ({"EVOTUI_PIPELINE__MODEE": "sync"}, "environment variable EVOTUI_PIPELINE__MODEE: unknown key 'pipeline.modee'"),
    ({"EVOTUI_BUDGET__MAX_PROPOSALS": "many"}, "EVOTUI_BUDGET__MAX_PROPOSALS: 'budget.max_proposals'"),
])
def test_bad_environment_is_one_line_and_exit_2(env, expect):
    for args in (("config", "show"), ("run", "rules", "--no-ui", "--db", "unused.db")):
        proc = evotui(*args, env=env)
        assert proc.returncode == 2, proc.stderr
        assert expect in proc.stderr and "Traceback" not in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
