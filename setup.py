"""Build hook only (metadata lives in pyproject.toml): copy the top-level tasks/ and themes/
folders into the wheel, under engine/_bundled and evotui/_bundled, where engine.costs.resources
finds them in a non-editable install."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

BUNDLED = {"tasks": "engine", "themes": "evotui"}


class BuildPyWithData(build_py):
    def run(self) -> None:
        super().run()
        for folder, package in BUNDLED.items():
            source = Path(folder)
            if not source.is_dir():  # building from an sdist that lacks them would ship a broken tool
                raise SystemExit(f"setup.py: {folder}/ is missing; build from a full checkout or sdist")
            target = Path(self.build_lib) / package / "_bundled" / folder
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.db*"))


setup(cmdclass={"build_py": BuildPyWithData})
