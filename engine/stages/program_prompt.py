"""The proposer prompt of program tasks and its bounded sections.

Layout puts the stable part first so server prefix caches hit: the system message (fixed for
the run, including the output-format contract), the task description, the top programs (which
change only when the pool's top changes), then the parent, its metrics and feedback, its last
change, the lines its lineage deleted (with the cycling guard on) and the recent failures (most
volatile last). Every section has a character budget;
clipped text carries an explicit truncation marker.

Contract with any LLM (and the simulator): the system message contains
"evotui-patch-format: <diff|full|udiff>", the parent is the ```<language> block under
"## Current program" (```python, ```rust, ... : the fence tag names the candidate's language),
inspirations are such blocks under "## Other programs", and a retry request starts with
"## Patch errors".
"""

from __future__ import annotations

from engine.code.languages import PYTHON, LanguageSpec

DEFAULT_SYSTEM = (
    "You are an expert programmer improving a program through small, careful changes. An automatic "
    "evaluator scores each version (combined_score, higher is better). Study the current program, "
    "its metrics and the evaluator's feedback, learn from the other programs and the failed attempts, "
    "and propose one change likely to raise the score. Only code between '{start}' and "
    "'{end}' may change."
)

FORMAT = {
    "diff": (
        "Output format (evotui-patch-format: diff): one or more SEARCH/REPLACE blocks, each exactly:\n"
        "<<<<<<< SEARCH\n<lines copied exactly from the current program>\n=======\n<new lines>\n"
        ">>>>>>> REPLACE\n"
        "SEARCH must match exactly one place in the current program. Give a one-line reason first."
    ),
    "full": (
        "Output format (evotui-patch-format: full): the complete new program in a single ```{fence} block, "
        "with the EVOLVE-BLOCK markers and all code outside them unchanged. Give a one-line reason first."
    ),
    "udiff": (
        "Output format (evotui-patch-format: udiff): a unified diff of the current program in a ```diff "
        "block (--- / +++ headers, @@ hunks, lines starting with ' ', '-' or '+'). Give a one-line reason first."
    ),
}

REMOVED_HEADING = "## Lines removed earlier in this lineage (do not re-add without a reason)"
TRIED_HEADING = "## Changes already tried on this program (propose a different one)"
REMOVED_SHOWN = 12
REMOVED_LINE_CHARS = 200
SHARES = {"parent": 0.4, "others": 0.2, "feedback": 0.1, "change": 0.1, "tried": 0.1, "failures": 0.1}


def clip(text: str, limit: int) -> str:
    """text, or its head and tail around an explicit marker when longer than limit."""
    if len(text) <= limit:
        return text
    keep = max(0, limit - 60)
    head, tail = text[: keep * 2 // 3], text[len(text) - keep // 3:] if keep // 3 else ""
    return f"{head}\n[... {len(text) - len(head) - len(tail)} characters truncated ...]\n{tail}"


def system_message(custom: str, fmt: str, language: LanguageSpec = PYTHON) -> str:
    """The system message; the default one and the format contract name the language's markers and fence."""
    base = custom or DEFAULT_SYSTEM.format(start=language.marker("START"), end=language.marker("END"))
    if not language.ast_verdict and not custom:
        base += f" The program is written in {language.name}; the evaluator is Python and runs it."
    return f"{base.strip()}\n\n{FORMAT[fmt].replace('{fence}', language.fence)}"


def fmt_score(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.6g}"


def build_messages(*, system: str, description: str, parent_id: str, parent_code: str, parent_score: float | None,
                   metrics: dict, feedback: dict, last_change: str, others: list[tuple[str, float, str]],
                   failures: list[str], fmt: str, max_chars: int, language: LanguageSpec = PYTHON,
                   removed: list[str] | None = None, tried: list[tuple[str, str]] | None = None) -> list[dict]:
    """Messages of one proposal request; others = (artifact id, score, program text); removed = lines
    the parent's lineage deleted (the cycling guard's section, shown only when given); tried =
    (diff, outcome) of changes already tried on the parent (program_tried.py)."""
    budget = {k: int(v * max_chars) for k, v in SHARES.items()}
    fence = language.fence
    parts: list[str] = []
    if description:
        parts.append(f"## Task\n{clip(description.strip(), 2000)}\n")
    if others:
        each = max(400, budget["others"] // len(others))
        parts.append("## Other programs (for inspiration)")
        for aid, score, code in others:
            parts.append(f"### Program {aid} (combined_score {fmt_score(score)})\n```{fence}\n{clip(code.rstrip(), each)}\n```")
        parts.append("")
    parts.append(f"## Current program ({parent_id}, combined_score {fmt_score(parent_score)})\n"
                 f"```{fence}\n{clip(parent_code.rstrip(), budget['parent'])}\n```\n")
    if metrics:
        lines = "\n".join(f"- {k}: {fmt_score(v)}" for k, v in sorted(metrics.items()))
        parts.append(f"## Metrics\n{clip(lines, 1500)}\n")
    if feedback:
        lines = "\n".join(f"- {k}: {v}" for k, v in sorted(feedback.items()))
        parts.append(f"## Evaluator feedback\n{clip(lines, budget['feedback'])}\n")
    if last_change:
        parts.append(f"## Change that produced the current program\n```diff\n{clip(last_change.rstrip(), budget['change'])}\n```\n")
    if removed:
        lines = "\n".join(f"- {clip(ln, REMOVED_LINE_CHARS)}" for ln in removed[:REMOVED_SHOWN])
        parts.append(f"{REMOVED_HEADING}\n{lines}\n")
    if tried:
        each = max(300, budget["tried"] // len(tried))
        shown = "\n".join(f"- {outcome}\n```diff\n{clip(diff.rstrip(), each)}\n```" for diff, outcome in tried)
        parts.append(f"{TRIED_HEADING}\n{shown}\n")
    if failures:
        lines = "\n".join(f"- {clip(f, max(200, budget['failures'] // len(failures)))}" for f in failures)
        parts.append(f"## Recent failed attempts\n{lines}\n")
    verb = {"diff": "SEARCH/REPLACE blocks", "full": "the complete program", "udiff": "a unified diff"}[fmt]
    parts.append(f"Propose one improvement to the current program. Answer with {verb}.")
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(parts)}]


def retry_messages(messages: list[dict], reply: str, errors: list[str], fmt: str) -> list[dict]:
    """The conversation extended with the failed reply and precise errors for a bounded retry."""
    listed = "\n".join(f"- {clip(e, 1200)}" for e in errors[:8])
    more = f"\n- ... and {len(errors) - 8} more" if len(errors) > 8 else ""
    ask = {"diff": "corrected SEARCH/REPLACE blocks", "full": "the corrected complete program",
           "udiff": "a corrected unified diff"}[fmt]
    return [*messages, {"role": "assistant", "content": clip(reply, 6000)},
            {"role": "user", "content": f"## Patch errors\nYour answer could not be applied to the current program:\n"
                                        f"{listed}{more}\nAnswer again with {ask} against the current program shown above."}]
