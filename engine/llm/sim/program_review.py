"""Requests that review programs rather than edit them: a novelty comparison of two programs and
a three-step meta review (one summary per program, insights over the summaries, numbered
recommendations). ShinkaEvolve's unchanged novelty and meta templates ask for these; they are
recognised by the reply format a request asks for, never by whose template it is:

- novelty: a request naming both ``NOVEL`` and ``NOT_NOVEL`` as answers over two fenced blocks;
- a program summary: a request asking for ``**Program Name:`` over a fenced program;
- insights: a request asking for ``Successful Algorithmic Patterns`` and ``Ineffective Approaches``
  sections;
- recommendations: a request asking to ``generate N ... recommendations`` as a numbered list.

Answers are deterministic (no randomness) and read only the request: novelty compares the code
without comments and blank lines; summaries name the program's functions and named constants and
copy its score; insights rank the summarised programs by score; recommendations name the best
program's constants to tune but state no direction (the simulator knows no task, so it cannot
know which way helps; the proposer's stated-direction rule, directions.py, has nothing to follow).
"""

from __future__ import annotations

import re

from engine.code.languages import PYTHON, by_fence
from engine.llm.sim.plugins import SimRequest

_FENCE = re.compile(r"```([\w+-]*)\n(.*?)```", re.S)
_DEF = re.compile(r"^\s*(?:def|fn|func|function)\s+(\w+)", re.M)
_CONST = re.compile(r"^\s*([A-Za-z_]\w*)\s*=\s*(-?\d+(?:\.\d+)?)\s*(?:#.*)?$", re.M)
_SCORE = re.compile(r"Combined score to maximize: (-?\d+(?:\.\d+)?)")
# a summary's name and score (its own, not the next summary's: the gap may not start another)
_SUMMARY = re.compile(r"\*\*Program Name: (.*?)\*\*(?:(?!\*\*Program Name:).)*?Combined score (-?\d+(?:\.\d+)?)", re.S)
_HOW_MANY = re.compile(r"generate (\d+)\s+actionable recommendations", re.I)


def _kind(req: SimRequest) -> str | None:
    text = req.system + "\n" + req.user
    if "NOT_NOVEL" in text and re.search(r"\bNOVEL\b", text.replace("NOT_NOVEL", "")) and len(_FENCE.findall(req.user)) >= 2:
        return "novelty"
    # Most specific request first: a later step quotes the earlier steps' replies.
    if _HOW_MANY.search(req.user):
        return "recommendations"
    if "Successful Algorithmic Patterns" in req.user and "Ineffective Approaches" in req.user:
        return "insights"
    if "**Program Name:" in req.user and _FENCE.search(req.user):
        return "summary"
    return None


def recognises(req: SimRequest) -> bool:
    return _kind(req) is not None


def _code_lines(tag: str, code: str) -> list[str]:
    comment = (by_fence(tag) or PYTHON).comment
    return [s for ln in code.splitlines() if (s := ln.split(comment)[0].strip())]


def _novelty(user: str) -> str:
    (tag_a, a), (tag_b, b) = _FENCE.findall(user)[:2]
    old, new = _code_lines(tag_a, a), _code_lines(tag_b, b)
    if old == new:
        return "NOT_NOVEL\nThe proposed code differs from the existing code only in comments or formatting."
    changed = len(set(new) ^ set(old))
    return f"NOVEL\nThe proposed code changes {changed} line(s) of logic or parameters."


def _facts(code: str) -> tuple[list[str], list[str]]:
    """(function names, `name = value` constants) of a program."""
    return _DEF.findall(code), [f"{n} = {v}" for n, v in _CONST.findall(code)]


def _summary(user: str) -> str:
    code = _FENCE.search(user).group(2)
    funcs, consts = _facts(code)
    score = _SCORE.search(user)
    name = f"{funcs[0] if funcs else 'program'} with {len(consts)} named constant(s)"
    impl = (f"Defines {', '.join(funcs) or 'no function'}; {len(_code_lines('', code))} lines of code"
            + (f"; constants {', '.join(consts[:4])}." if consts else "; no named constant."))
    perf = f"Combined score {float(score.group(1)):.4f}." if score else "No score reported."
    feedback = ("The program does not pass validation." if "is incorrect" in user
                else "The program passes validation; no further feedback given.")
    return (f"**Program Name: {name}**\n- **Implementation**: {impl}\n"
            f"- **Performance**: {perf}\n- **Feedback**: {feedback}")


def _insights(user: str) -> str:
    ranked = sorted(((float(s), n.strip()) for n, s in _SUMMARY.findall(user)), reverse=True)
    best = _SCORE.search(user[user.find("Current Best Program"):]) if "Current Best Program" in user else None
    if not ranked:
        return ("## Successful Algorithmic Patterns\n- No scored program summaries were given.\n\n"
                "## Ineffective Approaches\n- None identified.\n\n## Implementation Insights\n- None yet.\n\n"
                "## Performance Analysis\n- No scores to compare.")
    top, low = ranked[0], ranked[-1]
    best_line = f" The current best program scores {float(best.group(1)):.4f}." if best else ""
    return (f"## Successful Algorithmic Patterns\n- {top[1]} scored highest ({top[0]:.4f}).{best_line}\n\n"
            f"## Ineffective Approaches\n- {low[1]} scored lowest ({low[0]:.4f}).\n\n"
            f"## Implementation Insights\n- {len(ranked)} program(s) summarised; the best keeps its "
            "structure and differs in its settings.\n\n"
            f"## Performance Analysis\n- Scores range from {low[0]:.4f} to {top[0]:.4f}.")


def _recommendations(user: str) -> str:
    n = int(_HOW_MANY.search(user).group(1))
    best = user[user.find("Current Best Program"):] if "Current Best Program" in user else user
    fence = _FENCE.search(best)
    consts = _facts(fence.group(2))[1] if fence else []
    recs = [f"Tune the constant `{c.split(' = ')[0]}` (now {c.split(' = ')[1]}) of the best program in "
            "small steps and keep the change only if the score improves." for c in consts]
    recs += ["Keep the best program's structure and change one step of it at a time, so each "
             "change can be judged by its score.",
             "Adopt a setting from another well-scoring program into the best program.",
             "Add a term or a refinement step to the best program's main computation and check that "
             "it still passes validation."]
    return "\n".join(f"{k}. {r}" for k, r in enumerate(recs[:n], 1))


def answer(req: SimRequest) -> str:
    kind = _kind(req)
    if kind == "novelty":
        return _novelty(req.user)
    if kind == "summary":
        return _summary(req.user)
    if kind == "insights":
        return _insights(req.user)
    return _recommendations(req.user)
