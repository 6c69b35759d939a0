"""`evotui bench --suite` flags, apart from evotui/bench/suite.py so building the CLI's parser
imports no engine module."""

from __future__ import annotations

import argparse


def add_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("suite (declared tasks x rows x seeds; evotui/bench/suites.toml)")
    g.add_argument("--suite", metavar="NAME", help="run a declared suite: ci, prompt, program, quick, or FILE.toml[:NAME]; "
                   "prints per task and row eval/min, ratio to the reference, best and held-out paired by seed")
    g.add_argument("--suite-seeds", type=int, metavar="N", help="with --suite: seeds per row (default: the suite's)")
    g.add_argument("--suite-tasks", metavar="A,B", help="with --suite: only these tasks of the suite")
