"""Answers run at once for one decision: all of them are needed, or none is."""

from __future__ import annotations

import asyncio


async def gather_cancelling(tasks: list[asyncio.Future]) -> list[dict]:
    """Every task's result, in order; the first failure cancels the rest (their answers are no
    use), reaps them, and is raised."""
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
