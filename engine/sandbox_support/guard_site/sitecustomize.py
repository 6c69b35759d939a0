"""Loaded by every Python subprocess of a sandboxed evaluation that is not started with -I or -S
(the sandbox puts this folder on PYTHONPATH): guards it as the evaluator's own process is guarded
(see ../evotui_candidate_guard.py) and refuses Python sockets where the sandbox has no network
namespace. The candidate's own processes skip the guard (EVOTUI_CANDIDATE_HOST)."""

import os
import sys

_support = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.environ.get("EVOTUI_SANDBOX_NET_GUARD") or os.environ.get("EVOTUI_CANDIDATE"):
    sys.path.append(_support)
    if os.environ.get("EVOTUI_SANDBOX_NET_GUARD"):
        import evotui_sandbox_eval

        evotui_sandbox_eval.block_network()
    import evotui_candidate_guard

    evotui_candidate_guard.install_from_env()
