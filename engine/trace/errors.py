"""The one error type of engine.trace: a user mistake (a missing run, a malformed file), shown
as one line by the CLI (exit 2), never a traceback."""


class TraceError(Exception):
    pass
