"""The search handlers of a run: its task kind running its strategy."""

from __future__ import annotations

from engine.config import RunConfig
from engine.context import RunContext
from engine.pipeline.spec import SearchHandlers
from engine.stages.adapter_stages import AdapterStages
from engine.stages.program_stages import ProgramStages
from engine.stages.prompt_stages import PromptStages
from engine.strategy import SearchParams, Strategy, build


def search_params(task, config: RunConfig) -> SearchParams:
    """A program task's [program] selection settings (a prompt task has none: the defaults) and
    the run's per-strategy tables."""
    # Every [strategy.<name>] table, validated by engine/config/__init__.py; a factory reads its own.
    options = {key: value for key, value in config.strategy.model_dump().items() if key != "name"}
    if task.kind != "program":
        return SearchParams(options=options)
    s = task.settings
    return SearchParams(tournament_size=s.tournament_size, elite_size=s.elite_size, explore_prob=s.explore_prob,
                        num_top=s.num_top, num_diverse=s.num_diverse, options=options,
                        descriptors=getattr(task, "descriptors", None))


def strategy_for(ctx: RunContext) -> Strategy:
    """The run's strategy ([strategy] name, else the kind's default); UnknownStrategy if none has that name."""
    return build(ctx.config.strategy.name, ctx.task.kind, search_params(ctx.task, ctx.config))


def build_handlers(ctx: RunContext, strategy: Strategy | None = None) -> SearchHandlers:
    """ValueError (the message says what to change) when the mode cannot run the strategy."""
    chosen = strategy or strategy_for(ctx)
    if chosen.audited and ctx.task.kind == "program":
        raise ValueError(f"strategy {chosen.name} audits the components of prompt and adapter tasks; a program is "
                         "one text (use --strategy openevolve, or a prompt task)")
    if ctx.task.kind == "program":
        return ProgramStages(ctx, chosen)
    if ctx.task.kind == "adapter":
        return AdapterStages(ctx, chosen)
    return PromptStages(ctx, chosen)
