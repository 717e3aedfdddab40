"""What the wheel is built from (``pyproject.toml``'s ``[tool.setuptools]``): every package of the seven source
folders is listed, ``conf/`` is installed as ``livectl_conf``, and every file in ``conf/`` is package data.

The list is written out because ``conf/`` is installed under another name (``package-dir``), which a find
directive cannot do; this test keeps the list from forgetting a new package."""

from __future__ import annotations

import fnmatch
import subprocess
import tomllib
from pathlib import Path

import pytest

from streaming.resources import CONF_PACKAGE, SHIPPED, conf_file, conf_root

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[3]
SOURCE_FOLDERS = ("core", "streaming", "sinks", "livectl", "simbrokers", "admin", "channel")


def _setuptools() -> dict[str, object]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    tool: dict[str, object] = config["tool"]["setuptools"]
    return tool


def _packages() -> set[str]:
    """Every package under the source folders, as setuptools' ``find_packages`` finds them: a folder with an
    ``__init__.py`` whose every parent up to the source folder is one too (setuptools is no part of a 3.12+
    virtual environment, so it is not imported here)."""
    found = set()
    for folder in SOURCE_FOLDERS:
        for init in (REPO / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(REPO).parts
            if all((REPO.joinpath(*parts[:i]) / "__init__.py").is_file() for i in range(1, len(parts) + 1)):
                found.add(".".join(parts))
    return found


def test_the_listed_packages_are_every_package_of_the_source_folders_and_conf() -> None:
    found = _packages()
    listed = _setuptools()["packages"]
    assert isinstance(listed, list)
    assert set(listed) == found | {CONF_PACKAGE}
    assert len(listed) == len(set(listed))


def test_conf_is_installed_as_the_conf_package_and_every_file_in_it_is_package_data() -> None:
    tool = _setuptools()
    assert tool["package-dir"] == {CONF_PACKAGE: "conf"}
    package_data = tool["package-data"]
    assert isinstance(package_data, dict)
    patterns = package_data[CONF_PACKAGE]
    tracked = subprocess.run(
        ["git", "ls-files", "conf"], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout.split()
    assert tracked
    # setuptools' globs: "*" matches within one folder level, as fnmatch does once the levels are compared
    for path in tracked:
        name = path.removeprefix("conf/")
        assert any(name.count("/") == p.count("/") and fnmatch.fnmatchcase(name, p) for p in patterns), (
            f"{path} matches no package-data pattern of {CONF_PACKAGE}: the wheel would leave it out"
        )


def test_the_shipped_files_are_found_in_the_checkout() -> None:
    assert conf_root() == REPO / "conf"
    for name in SHIPPED:
        assert conf_file(name).is_file(), name
