"""The command table (evotui/cli.py COMMANDS) is the only place a subcommand is declared: each
has a help line and a line in README's command list, and the parser holds nothing else."""

import argparse
import re
from pathlib import Path

from evotui import cli

README = Path(__file__).resolve().parents[1] / "README.md"


def command_list(readme: str) -> set[str]:
    """Subcommand names the first code block under "## Commands" shows (`evotui NAME ...` lines)."""
    section = readme.split("\n## Commands\n", 1)[1]
    block = section.split("```", 2)[1]
    return {m.group(1) for m in re.finditer(r"^evotui ([a-z][a-z-]*)", block, re.M)}


def undocumented(commands, readme: str) -> list[str]:
    listed = command_list(readme)
    return [c.name for c in commands if c.name not in listed]


def test_every_command_has_a_help_line():
    assert [c.name for c in cli.COMMANDS if not c.help.strip()] == []


def test_every_command_is_in_the_readme_command_list():
    assert undocumented(cli.COMMANDS, README.read_text()) == []


def test_the_check_catches_an_undocumented_command():
    extra = cli.Command("frobnicate", "a command nobody wrote up", lambda p: None, lambda a: 0)
    readme = "intro\n## Commands\n\n```\nevotui run TASK\nevotui runs\n```\nevotui frobnicate (outside the list)\n"
    assert undocumented([*cli.COMMANDS[:1], extra], readme) == ["frobnicate"]


def test_names_are_unique_and_the_parser_holds_only_the_table():
    names = [c.name for c in cli.COMMANDS]
    assert len(names) == len(set(names))
    parser = cli.build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert list(sub.choices) == names
    helps = {action.dest: action.help for action in sub._choices_actions}
    assert helps == {c.name: c.help for c in cli.COMMANDS}


def test_each_command_parses_to_its_own_handler():
    parser = cli.build_parser()
    args = parser.parse_args(["show", "r1", "--db", "x.db"])
    assert cli.COMMANDS_BY_NAME[args.command].handler is cli._inspect
    assert (args.run_id, args.db) == ("r1", Path("x.db"))
    args = parser.parse_args(["tune", "r1", "a000001", "--trials", "3"])
    assert args.command == "tune" and args.trials == 3
    assert {c.name for c in cli.COMMANDS if c.scratch} == {"bench", "bench-ui", "bench-db", "bench-evaluator",
                                                              "sim-calibrate"}
