"""Packages that a site-packages .pth file puts on the import path stay readable under the read
confinement (issue 35 census: a venv sharing another environment's packages through a .pth line
had every evaluation fail with "Permission denied: .../numpy/__init__.py")."""

from __future__ import annotations

from pathlib import Path

from engine.sandbox.readable import pth_dirs


def test_directory_lines_of_pth_files_count_and_nothing_else(tmp_path: Path) -> None:
    site_dir = tmp_path / "site-packages"
    site_dir.mkdir()
    shared = tmp_path / "other-env" / "site-packages"
    shared.mkdir(parents=True)
    (site_dir / "local").mkdir()
    (site_dir / "shared.pth").write_text(f"# a comment\n{shared}\n\nlocal\n{tmp_path / 'missing'}\n")
    (site_dir / "hook.pth").write_text("import os; os.environ.get('X')\n")
    (site_dir / "notes.txt").write_text(f"{tmp_path}\n")
    assert pth_dirs([str(site_dir)]) == [str(shared.resolve()), str((site_dir / "local").resolve())]


def test_an_unreadable_or_missing_site_dir_gives_nothing(tmp_path: Path) -> None:
    assert pth_dirs([str(tmp_path / "nope")]) == []
