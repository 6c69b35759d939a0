"""Candidate languages: file suffixes, comment syntax of the EVOLVE-BLOCK markers, a grammar.

The evaluator is always Python; only the evolved candidate may be another language. A language
decides the candidate's file name (``program<suffix>``), the comment prefix the markers follow
(``// EVOLVE-BLOCK-START`` in Rust, ``! EVOLVE-BLOCK-START`` in Fortran), the fence tag of the
prompt, and how a proposal is pre-checked: ``ast`` for Python, a tree-sitter grammar where a
packaged one exists (installed with evotui; nothing is downloaded at run time), otherwise no
pre-check and the evaluator decides. Without a grammar, markers are found line by line.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import lru_cache

from tree_sitter import Language


@dataclass(frozen=True)
class LanguageSpec:
    name: str
    """Canonical name, as OpenEvolve's config.yaml ``language`` spells it."""
    suffixes: tuple[str, ...]
    """File suffixes, the first one used for the candidate file."""
    comments: tuple[str, ...]
    """Comment openers a marker may follow (line comments first)."""
    fence: str
    """Markdown fence tag of code blocks in prompts."""
    grammar: str | None = None
    """Module of a packaged tree-sitter grammar (``tree_sitter_rust``); None = line-based markers."""
    ast_verdict: bool = False
    """Python's ``ast.parse`` is the syntax verdict (tree-sitter only adds positions)."""
    aliases: tuple[str, ...] = ()

    @property
    def suffix(self) -> str:
        return self.suffixes[0]

    @property
    def comment(self) -> str:
        """The prefix new markers and comments are written with."""
        return self.comments[0]

    def marker(self, which: str) -> str:
        """``// EVOLVE-BLOCK-START`` and the like; which is "START" or "END"."""
        return f"{self.comment} EVOLVE-BLOCK-{which}"

    @property
    def fence_tags(self) -> tuple[str, ...]:
        return (self.fence, self.name, *self.aliases, *(s.lstrip(".").lower() for s in self.suffixes))


_C_COMMENTS = ("//", "/*")
LANGUAGES: tuple[LanguageSpec, ...] = (
    LanguageSpec("python", (".py",), ("#",), "python", "tree_sitter_python", ast_verdict=True, aliases=("py", "python3")),
    LanguageSpec("rust", (".rs",), _C_COMMENTS, "rust", "tree_sitter_rust", aliases=("rs",)),
    LanguageSpec("cpp", (".cpp", ".cc", ".cxx", ".hpp", ".hh"), _C_COMMENTS, "cpp", "tree_sitter_cpp",
                 aliases=("c++", "cxx")),
    LanguageSpec("c", (".c", ".h"), _C_COMMENTS, "c", "tree_sitter_c"),
    LanguageSpec("go", (".go",), _C_COMMENTS, "go", "tree_sitter_go", aliases=("golang",)),
    LanguageSpec("julia", (".jl",), ("#", "#="), "julia", "tree_sitter_julia", aliases=("jl",)),
    LanguageSpec("fortran", (".f90", ".f95", ".f03", ".f08", ".f", ".for"), ("!",), "fortran", "tree_sitter_fortran",
                 aliases=("f90",)),
    # No packaged grammar: markers line by line, the evaluator alone judges the syntax.
    LanguageSpec("r", (".r", ".R"), ("#",), "r"),
    LanguageSpec("cuda", (".cu", ".cuh"), _C_COMMENTS, "cuda"),
    LanguageSpec("javascript", (".js", ".mjs"), _C_COMMENTS, "javascript", aliases=("js",)),
    LanguageSpec("typescript", (".ts",), _C_COMMENTS, "typescript", aliases=("ts",)),
    LanguageSpec("java", (".java",), _C_COMMENTS, "java"),
    LanguageSpec("swift", (".swift",), _C_COMMENTS, "swift"),
    LanguageSpec("lua", (".lua",), ("--",), "lua"),
    LanguageSpec("shell", (".sh", ".bash"), ("#",), "bash", aliases=("sh", "bash")),
    LanguageSpec("matlab", (".m",), ("%",), "matlab"),
    LanguageSpec("systemverilog", (".sv", ".svh", ".v"), _C_COMMENTS, "systemverilog", aliases=("verilog", "sv")),
    LanguageSpec("wolfram", (".wl", ".wls"), ("(*",), "wolfram", aliases=("mathematica",)),
    # A prompt evolved as a file (OpenEvolve's `language: "text"`): no markers, the whole text evolves.
    LanguageSpec("text", (".txt",), ("#",), "text", aliases=("prompt", "plaintext")),
)
PYTHON = LANGUAGES[0]
_BY_NAME = {alias: spec for spec in LANGUAGES for alias in (spec.name, *spec.aliases)}
_BY_SUFFIX = {s: spec for spec in LANGUAGES for s in spec.suffixes}


class UnknownLanguage(ValueError):
    """A language name or suffix evotui has no comment syntax for."""


def known() -> str:
    return ", ".join(spec.name for spec in LANGUAGES)


def by_name(name: str) -> LanguageSpec:
    spec = _BY_NAME.get(name.strip().lower())
    if spec is None:
        raise UnknownLanguage(f"unknown language {name!r}; known: {known()}")
    return spec


def by_suffix(suffix: str) -> LanguageSpec:
    """The language of a file suffix (".rs"); R's ".R" and ".r" both count."""
    spec = _BY_SUFFIX.get(suffix) or _BY_SUFFIX.get(suffix.lower())
    if spec is None:
        raise UnknownLanguage(f"no language for file suffix {suffix!r}; known: {known()} "
                              "(or set language in config.yaml)")
    return spec


def by_fence(tag: str) -> LanguageSpec | None:
    """The language of a markdown fence tag, None when the tag names none (the simulator reads it)."""
    tag = tag.strip().lower()
    return next((spec for spec in LANGUAGES if tag in spec.fence_tags), None)


def resolve(language: LanguageSpec | str | None) -> LanguageSpec:
    """A spec from a spec, a name or None (Python, so every pre-language caller keeps working)."""
    if language is None:
        return PYTHON
    if isinstance(language, LanguageSpec):
        return language
    return by_name(language)


@lru_cache(maxsize=None)
def grammar(spec: LanguageSpec) -> Language | None:
    """The tree-sitter Language of spec, None when it has no packaged grammar."""
    if spec.grammar is None:
        return None
    try:
        module = importlib.import_module(spec.grammar)
    except ImportError:
        # The grammars are dependencies of evotui: a missing one is a broken install, not a task error.
        raise UnknownLanguage(f"the {spec.name} grammar ({spec.grammar}) is not installed; "
                              "reinstall evotui (pip install -e .)") from None
    return Language(module.language())


__all__ = ["LANGUAGES", "PYTHON", "LanguageSpec", "UnknownLanguage", "by_fence", "by_name", "by_suffix", "grammar",
           "known", "resolve"]
