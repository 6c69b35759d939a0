"""The CLI's subcommands, one module each (evotui/cli.py declares them in its command table)."""
