"""Loading prompt tasks from folders, and the errors a broken folder produces."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from engine.tasks import prompt_task
from engine.tasks.prompt_task import MetricResult, TaskError, load_task, resolve_task_path

METRIC = '''
def score(example, output):
    return {"score": 1.0 if output == example["answer"] else 0.0, "feedback": "expected " + example["answer"]}


def plain(example, output):
    return 0.25


def explode(example, output):
    return 1 / 0


def nan(example, output):
    return {"score": float("nan"), "feedback": "?"}


def inf(example, output):
    return float("inf")


def wrong_type(example, output):
    return ["not", "a", "score"]


def no_score(example, output):
    return {"feedback": "forgot the score"}


def word_score(example, output):
    return {"score": "high", "feedback": ""}


NOT_CALLABLE = 3
'''

TRAIN = [
    {"id": "t1", "input": "2+2", "answer": "4"},
    {"id": "t2", "input": "3+3", "answer": "6"},
]
VAL = [{"id": "v1", "input": "1+1", "answer": "2"}]


def jsonl(rows: list) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def make_task(
    root: Path,
    name: str = "arith",
    *,
    toml: str | None = None,
    extra_toml: str = "",
    metric_function: str = "score",
    train: str | None = None,
    val: str | None = None,
    metric: str = METRIC,
    seed: str = "  Answer with the number only.\n",
) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "seed.txt").write_text(seed)
    (folder / "train.jsonl").write_text(jsonl(TRAIN) if train is None else train)
    (folder / "val.jsonl").write_text(jsonl(VAL) if val is None else val)
    (folder / "metric.py").write_text(metric)
    if toml is None:
        toml = (
            f'name = "{name}"\n'
            'description = "tiny arithmetic"\n'
            'seed_prompt = "seed.txt"\n'
            'train = "train.jsonl"\n'
            'val = "val.jsonl"\n'
            f"{extra_toml}\n"
            "[metric]\n"
            'file = "metric.py"\n'
            f'function = "{metric_function}"\n'
        )
    (folder / "task.toml").write_text(toml)
    return folder


def message(exc_info: pytest.ExceptionInfo) -> str:
    return str(exc_info.value)


# -- a good task ------------------------------------------------------------------------------------


def test_load_a_valid_task(tmp_path: Path) -> None:
    folder = make_task(tmp_path, extra_toml='[defaults]\nseed = 7\n[defaults.pipeline]\nmode = "sync"\n')
    task = load_task(str(folder))
    assert task.name == "arith"
    assert task.path == folder.resolve()
    assert task.description == "tiny arithmetic"
    assert task.seed_prompt == "Answer with the number only."
    assert task.train_ids == ["t1", "t2"]
    assert task.val_ids == ["v1"]
    assert task.example("v1")["answer"] == "2"
    assert task.example("t2")["input"] == "3+3"
    assert task.defaults == {"seed": 7, "pipeline": {"mode": "sync"}}
    assert task.input_template == "{input}"
    assert task.user_message(task.example("t1")) == "2+2"
    assert task.score(task.example("t1"), "4") == MetricResult(1.0, "expected 4")
    assert task.score(task.example("t1"), "5") == MetricResult(0.0, "expected 4")


def test_name_defaults_to_folder_and_ids_are_generated(tmp_path: Path) -> None:
    rows = jsonl([{"input": "a", "answer": "x"}, {"input": "b", "answer": "y"}])
    folder = make_task(
        tmp_path,
        toml='seed_prompt = "seed.txt"\ntrain = "train.jsonl"\nval = "val.jsonl"\n[metric]\nfile = "metric.py"\n',
        train=rows + "\n   \n",  # blank lines are skipped
        val=jsonl([{"id": 17, "input": "c", "answer": "z"}]),
    )
    task = load_task(str(folder))
    assert task.name == "arith"
    assert task.train_ids == ["train-1", "train-2"]
    assert task.val_ids == ["17"], "ids are strings"
    assert task.score(task.example("17"), "z").score == 1.0  # function defaults to "score"


def test_custom_input_template(tmp_path: Path) -> None:
    folder = make_task(tmp_path, extra_toml='[input]\ntemplate = "Q: {input} (id {id})"\n')
    task = load_task(str(folder))
    assert task.user_message(task.example("t2")) == "Q: 3+3 (id t2)"


def test_a_plain_number_is_a_score_without_feedback(tmp_path: Path) -> None:
    task = load_task(str(make_task(tmp_path, metric_function="plain")))
    assert task.score(task.example("t1"), "anything") == MetricResult(0.25, "")


# -- finding the folder -----------------------------------------------------------------------------


def test_missing_folder_lists_builtin_tasks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    builtin = tmp_path / "builtin"
    make_task(builtin, "alpha")
    make_task(builtin, "beta")
    (builtin / "not_a_task").mkdir()
    monkeypatch.setattr(prompt_task, "BUILTIN_DIR", builtin)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TaskError) as info:
        load_task("nosuchtask")
    msg = message(info)
    assert "'nosuchtask'" in msg and "no such folder" in msg
    assert "built-in tasks: alpha, beta" in msg
    assert "not_a_task" not in msg


def test_builtin_and_cwd_tasks_resolve_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    builtin = tmp_path / "builtin"
    make_task(builtin, "alpha")
    work = tmp_path / "work"
    make_task(work / "tasks", "gamma")
    monkeypatch.setattr(prompt_task, "BUILTIN_DIR", builtin)
    monkeypatch.chdir(work)
    assert resolve_task_path("alpha") == (builtin / "alpha").resolve()
    assert resolve_task_path("gamma") == (work / "tasks" / "gamma").resolve()
    assert load_task("gamma").name == "gamma"


def test_missing_task_toml(tmp_path: Path) -> None:
    folder = tmp_path / "empty"
    folder.mkdir()
    with pytest.raises(TaskError) as info:
        load_task(str(folder))
    assert "no task.toml" in message(info)
    assert str(folder) in message(info)


# -- task.toml errors -------------------------------------------------------------------------------


def test_malformed_toml(tmp_path: Path) -> None:
    folder = make_task(tmp_path, toml='name = "unterminated\n')
    with pytest.raises(TaskError) as info:
        load_task(str(folder))
    assert "not valid TOML" in message(info)
    assert "task.toml" in message(info)


def test_unknown_key(tmp_path: Path) -> None:
    folder = make_task(tmp_path, extra_toml='seed_promt = "typo.txt"\n')
    with pytest.raises(TaskError) as info:
        load_task(str(folder))
    assert "unknown key(s) seed_promt" in message(info)
    assert "seed_prompt" in message(info)  # the allowed keys are listed


@pytest.mark.parametrize("key", ["seed_prompt", "train", "val"])
def test_missing_required_key(tmp_path: Path, key: str) -> None:
    lines = {
        "seed_prompt": 'seed_prompt = "seed.txt"',
        "train": 'train = "train.jsonl"',
        "val": 'val = "val.jsonl"',
    }
    body = "\n".join(v for k, v in lines.items() if k != key) + '\n[metric]\nfile = "metric.py"\n'
    folder = make_task(tmp_path, toml=body)
    with pytest.raises(TaskError, match=f"missing required key '{key}'"):
        load_task(str(folder))


def test_unsupported_kind(tmp_path: Path) -> None:
    folder = make_task(tmp_path, toml='kind = "program"\n')
    with pytest.raises(TaskError, match="kind 'program' is not supported"):
        load_task(str(folder))


def test_defaults_must_be_a_table(tmp_path: Path) -> None:
    folder = make_task(tmp_path, extra_toml="defaults = 3\n")
    with pytest.raises(TaskError, match=r"\[defaults\] must be a table"):
        load_task(str(folder))


def test_missing_seed_prompt_file(tmp_path: Path) -> None:
    folder = make_task(tmp_path)
    (folder / "seed.txt").unlink()
    with pytest.raises(TaskError, match="seed prompt file not found"):
        load_task(str(folder))


# -- example files ----------------------------------------------------------------------------------


def test_bad_jsonl_line_names_file_and_line(tmp_path: Path) -> None:
    bad = json.dumps(TRAIN[0]) + "\n" + '{"id": "t2", "input": \n'
    folder = make_task(tmp_path, train=bad)
    with pytest.raises(TaskError) as info:
        load_task(str(folder))
    assert f"{folder / 'train.jsonl'}:2:" in message(info)
    assert "not valid JSON" in message(info)


def test_non_object_line(tmp_path: Path) -> None:
    folder = make_task(tmp_path, val=jsonl(VAL) + "[1, 2]\n")
    with pytest.raises(TaskError) as info:
        load_task(str(folder))
    assert f"{folder / 'val.jsonl'}:2:" in message(info)
    assert "expected a JSON object, got list" in message(info)


def test_duplicate_ids(tmp_path: Path) -> None:
    rows = jsonl([TRAIN[0], TRAIN[1], {"id": "t1", "input": "9+9", "answer": "18"}])
    folder = make_task(tmp_path, train=rows)
    with pytest.raises(TaskError) as info:
        load_task(str(folder))
    assert f"{folder / 'train.jsonl'}:3:" in message(info)
    assert "duplicate example id 't1'" in message(info)


def test_empty_split(tmp_path: Path) -> None:
    folder = make_task(tmp_path, val="\n\n")
    with pytest.raises(TaskError, match="no examples"):
        load_task(str(folder))


def test_missing_split_file(tmp_path: Path) -> None:
    folder = make_task(tmp_path)
    (folder / "val.jsonl").unlink()
    with pytest.raises(TaskError) as info:
        load_task(str(folder))
    assert "val.jsonl" in message(info) and "file not found" in message(info)


def test_train_val_overlap(tmp_path: Path) -> None:
    folder = make_task(tmp_path, val=jsonl([{"id": "t2", "input": "3+3", "answer": "6"}]))
    with pytest.raises(TaskError) as info:
        load_task(str(folder))
    assert "train and val share example ids (t2)" in message(info)


def test_input_template_with_missing_key(tmp_path: Path) -> None:
    folder = make_task(tmp_path, extra_toml='[input]\ntemplate = "Question: {question}"\n')
    with pytest.raises(TaskError) as info:
        load_task(str(folder))
    assert "[input] template cannot be filled" in message(info)
    assert "'t1'" in message(info) and "question" in message(info)


def test_template_checked_lazily_on_later_examples(tmp_path: Path) -> None:
    rows = jsonl([TRAIN[0], {"id": "t2", "answer": "6"}])  # t2 has no "input"
    task = load_task(str(make_task(tmp_path, train=rows)))
    with pytest.raises(TaskError, match="'t2'"):
        task.user_message(task.example("t2"))


# -- the metric -------------------------------------------------------------------------------------


def test_missing_metric_function(tmp_path: Path) -> None:
    folder = make_task(tmp_path, metric_function="nope")
    with pytest.raises(TaskError) as info:
        load_task(str(folder))
    assert "no function 'nope'" in message(info)
    assert "metric.py" in message(info)


def test_metric_attribute_that_is_not_callable(tmp_path: Path) -> None:
    folder = make_task(tmp_path, metric_function="NOT_CALLABLE")
    with pytest.raises(TaskError, match="no function 'NOT_CALLABLE'"):
        load_task(str(folder))


def test_missing_metric_file_and_table(tmp_path: Path) -> None:
    folder = make_task(tmp_path)
    (folder / "metric.py").unlink()
    with pytest.raises(TaskError, match="metric file not found"):
        load_task(str(folder))
    other = make_task(tmp_path, "other", toml='seed_prompt = "seed.txt"\ntrain = "train.jsonl"\nval = "val.jsonl"\nmetric = "metric.py"\n')
    with pytest.raises(TaskError, match=r"\[metric\] needs file"):
        load_task(str(other))


def test_metric_that_fails_to_import(tmp_path: Path) -> None:
    folder = make_task(tmp_path, metric="def score(example, output):\n    return (\n")
    with pytest.raises(TaskError) as info:
        load_task(str(folder))
    assert "importing the metric failed (SyntaxError" in message(info)


def test_metric_raising_is_a_task_error_on_score(tmp_path: Path) -> None:
    task = load_task(str(make_task(tmp_path, metric_function="explode")))
    with pytest.raises(TaskError) as info:
        task.score(task.example("t1"), "4")
    assert "metric raised ZeroDivisionError" in message(info)
    assert "'t1'" in message(info)
    assert isinstance(info.value.__cause__, ZeroDivisionError)


@pytest.mark.parametrize("fn", ["nan", "inf"])
def test_non_finite_score_is_a_task_error(tmp_path: Path, fn: str) -> None:
    task = load_task(str(make_task(tmp_path, metric_function=fn)))
    with pytest.raises(TaskError, match="non-finite score on example 'v1'"):
        task.score(task.example("v1"), "2")


@pytest.mark.parametrize("fn", ["wrong_type", "no_score"])
def test_metric_result_without_a_score(tmp_path: Path, fn: str) -> None:
    task = load_task(str(make_task(tmp_path, metric_function=fn)))
    with pytest.raises(TaskError, match="metric must return a number or a dict with 'score'"):
        task.score(task.example("t1"), "4")


def test_non_numeric_score_is_a_task_error(tmp_path: Path) -> None:
    task = load_task(str(make_task(tmp_path, metric_function="word_score")))
    with pytest.raises(TaskError):
        task.score(task.example("t1"), "4")


def test_two_tasks_keep_their_own_metrics(tmp_path: Path) -> None:
    a = load_task(str(make_task(tmp_path / "one", "same")))
    b = load_task(str(make_task(tmp_path / "two", "same", metric="def score(example, output):\n    return 0.5\n")))
    assert a.score(a.example("t1"), "4").score == 1.0
    assert b.score(b.example("t1"), "4").score == 0.5
    assert not math.isnan(a.score(a.example("t1"), "x").score)
