"""Program tasks: a program with EVOLVE-BLOCK regions and an evaluator run in the sandbox.

Three folder formats load into the same ProgramTask:
- native:       task.toml (kind = "program") + initial_program.py + evaluator.py
- OpenEvolve:   initial_program.<ext> + evaluator.py (+ config.yaml; mapped keys honoured, the rest
                listed once in ProgramTask.warnings); a prompt-optimisation folder has initial_prompt.txt
                instead, a text candidate without markers (evolved whole) that the evaluator scores
- ShinkaEvolve: initial.<ext> + evaluate.py, run as `python evaluate.py --program_path P --results_dir D`

The evaluator is Python; the candidate may be another language (engine/code/languages.py): it is
config.yaml's `language` / `file_suffix` (OpenEvolve), task.toml's `language`, or else the initial
file's suffix. The candidate file is then program<suffix> (main<suffix> for ShinkaEvolve).
The evaluator is never imported here: its functions are found with ast.

task.toml (native):
    name, kind = "program", description, initial_program, evaluator
    [program]    ProgramSettings keys
    [defaults]   RunConfig overrides
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine.code.evolve_blocks import RegionError, check_syntax, find_regions
from engine.code.languages import LANGUAGES, PYTHON, LanguageSpec, UnknownLanguage, by_name, by_suffix
from engine.code.patches import FORMATS
from engine.config import format_validation_error
from engine.sandbox import SandboxLimits
from engine.tasks.openevolve_config import OPENEVOLVE_DEFAULTS, map_openevolve, read_openevolve_yaml
from engine.tasks.prompt_task import TaskError, read_task_text, read_task_toml
from engine.strategy.descriptors import DescriptorError, Descriptors, parse_descriptors

NATIVE_KEYS = {"name", "kind", "description", "initial_program", "evaluator", "program", "defaults", "language",
               "heldout", "descriptor"}
HELDOUT_EVALUATOR = "heldout_evaluator.py"
"""The held-out evaluator a native task uses when its task.toml declares none ([heldout] evaluator)."""
PROMPT_STEM = "initial_prompt"
"""OpenEvolve's prompt-optimisation folders: initial_prompt.txt + evaluator.py, the prompt evolved whole."""
EXPECTED = ("expected task.toml (evotui), initial_program.py + evaluator.py [+ config.yaml] (OpenEvolve; "
            "initial_prompt.txt for a prompt) "
            "or initial.py + evaluate.py (ShinkaEvolve); the initial program may be in another language "
            "(initial_program.rs, initial.jl, ...)")


class ProgramSettings(BaseModel):
    """Program-task settings (task.toml [program], or mapped from OpenEvolve's config.yaml)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    patch_format: Literal["diff", "full", "udiff"] = "diff"
    """diff: SEARCH/REPLACE blocks; full: whole-program rewrite; udiff: unified diff."""
    system_message: str = ""
    """Replaces the proposer's default system message (format instructions are always added)."""
    eval_timeout_s: float = Field(default=30.0, gt=0)
    eval_memory_mb: int = Field(default=2048, gt=0)
    eval_nproc: int = Field(default=64, gt=0)
    eval_fsize_mb: int = Field(default=64, gt=0)
    """Largest file an evaluation may write."""
    eval_threads: int = Field(default=1, gt=0)
    """OMP/MKL/OpenBLAS/NumExpr threads inside the sandbox."""
    eval_concurrency: int = Field(default=2, gt=0)
    """Evaluations at once (separate from LLM concurrency)."""
    eval_retries: int = Field(default=0, ge=0)
    """Runs again an evaluation whose evaluator raised (OpenEvolve's evaluator.max_retries); a
    timeout or a resource limit is never retried."""
    eval_read_paths: list[str] = Field(default_factory=list)
    """Further paths evaluated code may read (toolchains or caches in a home directory, e.g. "~/.rustup");
    by default it reads only the system, the interpreter, the task folder and its scratch."""
    seed_must_pass: bool = False
    """A seed that fails its evaluator stops the run; by default it is generation 0 with score 0 and the
    search goes on from it (as OpenEvolve and ShinkaEvolve do)."""
    eval_candidate_process: bool = True
    """A Python candidate that the evaluator imports runs in a process of its own, so it cannot forge
    its score; false lets it share the evaluator's process (trusting the candidate)."""
    cascade: bool = False
    cascade_thresholds: list[float] = Field(default_factory=list)
    max_patch_retries: int = Field(default=2, ge=0)
    """Extra LLM calls per item to repair a patch that failed, with the errors as feedback."""
    num_top: int = Field(default=2, ge=0)
    """Top programs shown to the proposer as inspirations."""
    num_diverse: int = Field(default=1, ge=0)
    num_failures: int = Field(default=3, ge=0)
    """Recent failed attempts (with their errors) shown to the proposer."""
    num_tried: int = Field(default=4, ge=0)
    """Changes already tried on the parent (each with its score or why it failed) shown to the
    proposer, so it proposes a different one (engine/stages/program_tried.py); 0: none."""
    chain_unjoinable: Literal["evaluate", "reject"] = "evaluate"
    """mode chain: a step whose edit cannot join a head another chain moved meanwhile (a conflict, or
    the newer head holds its edit) is evaluated as it is, a branch of the head it was made from
    that may still become the head by its score (evaluate), or turned away unevaluated (reject:
    for evaluations costly enough that a branch is not worth one). evaluate by measurement
    (simulated vllm, 48 proposals, 16 seeds): heilbronn 5.3 more evaluated proposals per run and
    +0.012 +- 0.009 best; circle_packing, where about one step a run cannot join, +0.9 and no
    resolved difference."""
    max_prompt_chars: int = Field(default=24000, gt=2000)
    tournament_size: int = Field(default=3, gt=0)
    elite_size: int = Field(default=8, gt=0)
    """Tournaments draw from this many top programs."""
    explore_prob: float = Field(default=0.2, ge=0, le=1)
    """Chance that select() picks a uniformly random program instead of a tournament winner."""
    max_code_length: int | None = Field(default=None, gt=0)
    """Longest candidate program in characters; longer ones are filtered before evaluation."""
    cycling_guard: Literal["off", "warn", "penalise", "reject"] = "off"
    """A child re-adding lines deleted earlier in its lineage (engine/code/cycling.py): warn (noted in
    its meta), penalise (its score), reject (fails at validate as "filter cycling"); off = unchanged."""
    cycling_penalty: float = Field(default=0.5, ge=0, le=1)
    """penalise: the score is multiplied by 1 - cycling_penalty x the share of added lines recycled."""

    def limits(self) -> SandboxLimits:
        return SandboxLimits(wall_s=self.eval_timeout_s, memory_mb=self.eval_memory_mb, nproc=self.eval_nproc,
                             threads=self.eval_threads, fsize_mb=self.eval_fsize_mb,
                             read_paths=tuple(self.eval_read_paths),
                             candidate_process=self.eval_candidate_process, retries=self.eval_retries)


@dataclass(frozen=True)
class ProgramTask:
    name: str
    path: Path
    description: str
    initial_program: str
    evaluator: Path
    format: Literal["native", "openevolve", "shinka"]
    settings: ProgramSettings = field(default_factory=ProgramSettings)
    defaults: dict = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    kind: str = "program"
    language: LanguageSpec = PYTHON
    suffix: str = ".py"
    """The candidate file's suffix (the initial file's, or config.yaml's file_suffix)."""
    heldout_evaluator: Path | None = None
    descriptors: Descriptors | None = None
    """task.toml [[descriptor]]: LoongFlow's MAP-Elites axes (engine/strategy/descriptors.py)."""
    """[heldout] evaluator (or heldout_evaluator.py beside task.toml): a second evaluator that
    `evotui analyze` re-scores the best-so-far chain with (overfitting check); runs never use it."""

    @property
    def sandbox_mode(self) -> str:
        return "shinka" if self.format == "shinka" else "openevolve"

    @property
    def program_name(self) -> str:
        return ("main" if self.format == "shinka" else "program") + self.suffix

    # Prompt-task attributes the shared runner may touch (a program task has no examples).
    @property
    def train_ids(self) -> list[str]:
        return ["program"]

    @property
    def val_ids(self) -> list[str]:
        return []


def _evaluator_functions(path: Path) -> set[str]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError as exc:
        raise TaskError(f"{path}:{exc.lineno}: evaluator has a syntax error ({exc.msg}); fix it") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskError(f"{path}: cannot read the evaluator ({exc})") from None
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _check_evaluator(path: Path, shinka: bool) -> None:
    if not path.is_file():
        raise TaskError(f"{path}: evaluator file not found")
    if shinka:
        return
    funcs = _evaluator_functions(path)
    if "evaluate" not in funcs and "evaluate_stage1" not in funcs:
        raise TaskError(f"{path}: no top-level evaluate(program_path) function; define one returning a dict "
                        "with combined_score")


def _read_program(path: Path, language: LanguageSpec, warnings: list[str]) -> str:
    if not path.is_file():
        raise TaskError(f"{path}: initial program not found")
    text = read_task_text(path, "the initial program")
    try:
        find_regions(text, language)
    except RegionError as exc:
        raise TaskError(f"{path}: {exc} (markers are '{language.marker('START')}' / '{language.marker('END')}')") from None
    problem = check_syntax(text, language)
    if problem is not None:
        if language.ast_verdict:
            raise TaskError(f"{path}: initial program does not parse ({problem})")
        # A grammar may lag the compiler the evaluator uses: the evaluator decides, proposals are
        # then pre-checked only for errors the parent does not have (engine/code/filters.py).
        warnings.append(f"{path.name}: {problem}; the evaluator decides whether it compiles")
    return text


def _docstring(text: str, language: LanguageSpec) -> str:
    if not language.ast_verdict:
        return ""
    try:
        return (ast.get_docstring(ast.parse(text)) or "").strip()
    except SyntaxError:
        return ""


def _initial_files(folder: Path, stem: str) -> list[Path]:
    """stem.<ext> files of folder with a suffix of a known language (initial_program.rs, initial.jl)."""
    known = {s.lower() for spec in LANGUAGES for s in spec.suffixes}
    return sorted(p for p in folder.glob(f"{stem}.*")
                  if p.is_file() and p.name == stem + p.suffix and p.suffix.lower() in known)


def _language_of(path: Path, name: str | None, source: str) -> LanguageSpec:
    try:
        return by_name(name) if name else by_suffix(path.suffix)
    except UnknownLanguage as exc:
        raise TaskError(f"{source}: {exc}") from None


def _pick_initial(folder: Path, stem: str, language: str | None, suffix: str | None, source: str) -> Path:
    """The initial program: file_suffix's, else the language's, else .py, else the only stem.<ext>."""
    if suffix:
        path = folder / f"{stem}{suffix if suffix.startswith('.') else '.' + suffix}"
        if not path.is_file():
            raise TaskError(f"{path}: initial program not found ({source} sets file_suffix {suffix!r})")
        return path
    found = _initial_files(folder, stem)
    if language:
        spec = _language_of(folder / stem, language, source)
        mine = [p for p in found if p.suffix in spec.suffixes or p.suffix.lower() in spec.suffixes]
        if not mine:
            raise TaskError(f"{folder}: no {stem}{spec.suffix} for language {spec.name!r} ({source}); "
                            f"add it or set file_suffix")
        return mine[0]
    if (folder / f"{stem}.py").is_file():
        return folder / f"{stem}.py"
    if len(found) == 1:
        return found[0]
    if not found:
        raise TaskError(f"{folder}: no {stem}.<ext> initial program; {EXPECTED}")
    raise TaskError(f"{folder}: several initial programs ({', '.join(p.name for p in found)}); "
                    "set language (or file_suffix) in config.yaml")


def _settings(raw: dict, source: str) -> ProgramSettings:
    try:
        return ProgramSettings.model_validate(raw)
    except ValidationError as err:
        raise TaskError(format_validation_error(err, source)) from None


def load_native(folder: Path, spec: dict) -> ProgramTask:
    toml_path = folder / "task.toml"
    unknown = sorted(set(spec) - NATIVE_KEYS)
    if unknown:
        raise TaskError(f"{toml_path}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(NATIVE_KEYS))}")
    path = folder / str(spec.get("initial_program", "initial_program.py"))
    language = _language_of(path, spec.get("language"), str(toml_path))
    warnings: list[str] = []
    program = _read_program(path, language, warnings)
    evaluator = folder / str(spec.get("evaluator", "evaluator.py"))
    _check_evaluator(evaluator, shinka=False)
    defaults = spec.get("defaults", {})
    if not isinstance(defaults, dict):
        raise TaskError(f"{toml_path}: [defaults] must be a table")
    return ProgramTask(
        name=str(spec.get("name", folder.name)), path=folder, description=str(spec.get("description", "")),
        initial_program=program, evaluator=evaluator.resolve(), format="native",
        settings=_settings(spec.get("program", {}), f"{toml_path} [program]"), defaults=defaults,
        warnings=tuple(warnings), language=language, suffix=path.suffix,
        heldout_evaluator=_heldout_evaluator(folder, toml_path, spec.get("heldout")),
        descriptors=_descriptors(spec.get("descriptor"), toml_path),
    )


def _descriptors(raw: object, toml_path: Path) -> Descriptors | None:
    try:
        return parse_descriptors(raw, str(toml_path))
    except DescriptorError as err:
        raise TaskError(str(err)) from None


def _heldout_evaluator(folder: Path, toml_path: Path, table: object) -> Path | None:
    if table is None:
        default = folder / HELDOUT_EVALUATOR
        return default.resolve() if default.is_file() else None
    if not isinstance(table, dict) or set(table) != {"evaluator"} or not isinstance(table["evaluator"], str):
        raise TaskError(f"{toml_path}: [heldout] takes one key, evaluator = \"{HELDOUT_EVALUATOR}\"")
    path = folder / table["evaluator"]
    _check_evaluator(path, shinka=False)
    return path.resolve()


def _config_path(folder: Path) -> Path:
    cfg = folder / "config.yaml"
    if not cfg.is_file() and (folder / "config.yml").is_file():
        cfg = folder / "config.yml"
    return cfg


def load_openevolve(folder: Path) -> ProgramTask:
    cfg = _config_path(folder)
    raw: dict = {}
    if cfg.is_file():
        try:
            raw = read_openevolve_yaml(cfg)
        except ValueError as exc:
            raise TaskError(str(exc)) from None
    mapped = map_openevolve(raw)
    # OpenEvolve's prompt-optimisation examples start from initial_prompt.txt (language "text").
    stem = "initial_program" if _initial_files(folder, "initial_program") or not _initial_files(folder, PROMPT_STEM) \
        else PROMPT_STEM
    language_name = mapped.language or ("text" if stem == PROMPT_STEM else None)
    path = _pick_initial(folder, stem, language_name, mapped.file_suffix, cfg.name)
    language = _language_of(path, language_name, cfg.name)
    warnings: list[str] = []
    program = _read_program(path, language, warnings)
    evaluator = folder / "evaluator.py"
    _check_evaluator(evaluator, shinka=False)
    warnings = mapped.warnings(cfg.name) + warnings
    # OpenEvolve's own defaults where its config is silent (300 s timeout, cascade on).
    settings = {**OPENEVOLVE_DEFAULTS, **mapped.settings}
    funcs = _evaluator_functions(evaluator)
    if settings.get("cascade") and "evaluate_stage1" not in funcs:
        if "cascade" in mapped.settings:
            warnings.append(f"{cfg.name}: cascade_evaluation is on but evaluator.py has no evaluate_stage1; "
                            "using evaluate")
        settings["cascade"] = False
    return ProgramTask(
        name=folder.name, path=folder, description=_docstring(program, language), initial_program=program,
        evaluator=evaluator.resolve(), format="openevolve", settings=_settings(settings, str(cfg)),
        defaults=mapped.run, warnings=tuple(warnings), language=language, suffix=path.suffix,
    )


def load_shinka(folder: Path) -> ProgramTask:
    path = _pick_initial(folder, "initial", None, None, "initial.<ext>")
    language = _language_of(path, None, path.name)
    warnings: list[str] = []
    program = _read_program(path, language, warnings)
    evaluator = folder / "evaluate.py"
    _check_evaluator(evaluator, shinka=True)
    return ProgramTask(
        name=folder.name, path=folder, description=_docstring(program, language), initial_program=program,
        evaluator=evaluator.resolve(), format="shinka", warnings=tuple(warnings), language=language,
        suffix=path.suffix,
    )


def detect_format(folder: Path) -> str | None:
    if (folder / "task.toml").is_file():
        return "toml"
    if (folder / "evaluator.py").is_file() and ((folder / "initial_program.py").is_file()
                                                or _initial_files(folder, "initial_program")
                                                or _initial_files(folder, PROMPT_STEM)):
        return "openevolve"
    if (folder / "evaluate.py").is_file() and ((folder / "initial.py").is_file() or _initial_files(folder, "initial")):
        return "shinka"
    return None


def load_program_task(folder: Path) -> ProgramTask:
    """A program task from a folder in any of the three formats."""
    fmt = detect_format(folder)
    if fmt == "toml":
        return load_native(folder, read_task_toml(folder / "task.toml"))
    if fmt == "openevolve":
        return load_openevolve(folder)
    if fmt == "shinka":
        return load_shinka(folder)
    present = ", ".join(sorted(p.name for p in folder.iterdir())[:8]) or "nothing"
    raise TaskError(f"{folder}: not a task folder; {EXPECTED}; found {present}")


__all__ = ["FORMATS", "ProgramSettings", "ProgramTask", "detect_format", "load_program_task"]
