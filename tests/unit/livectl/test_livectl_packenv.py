"""``livectl package-env``: bad options are refused naming the option and the reason, before any build.
(The build itself — wheel, fresh venv, venv-pack — runs in ``tests/cluster``, whose executors use it.)"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from livectl import packenv
from livectl.cli import main
from livectl.packenv import REPO_ROOT, PackageEnvError, PackOptions, check_options, spark_submit_flags

pytestmark = pytest.mark.unit


def test_the_checkout_and_defaults_are_accepted(tmp_path: Path) -> None:
    check_options(PackOptions(output=tmp_path / "env.tar.gz"))
    assert (REPO_ROOT / "pyproject.toml").is_file()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"source": Path("/")}, "--source: / is not a livectl checkout (no pyproject.toml)"),
        ({"output": Path("env.tar.xz")}, "--output: env.tar.xz must end in one of .tar.gz, .tgz, .tar, .zip"),
        ({"compress_level": 10}, "--compress-level: must be 0 to 9, got 10"),
        ({"python": "/nonexistent/python3"}, "--python: /nonexistent/python3 is not an executable"),
        ({"python_prefix": "usr/local"}, "--python-prefix: must be an absolute path, got usr/local"),
    ],
)
def test_bad_options_name_the_option(change: dict[str, object], message: str) -> None:
    with pytest.raises(PackageEnvError) as e:
        check_options(dataclasses.replace(PackOptions(), **change))  # type: ignore[arg-type]
    assert str(e.value) == message


def test_a_foreign_pyproject_is_refused(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "other"\n')
    with pytest.raises(PackageEnvError, match="is not livectl's"):
        check_options(PackOptions(source=tmp_path))


def test_command_exits_1_with_the_message(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["package-env", "--output", "env.rar"]) == 1
    assert "livectl package-env: --output: env.rar must end in one of" in capsys.readouterr().err


def test_without_venv_pack_one_line_says_to_install_the_pack_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A plain ``pip install`` of the wheel has no venv-pack: no traceback, one line naming the extra."""
    monkeypatch.setitem(sys.modules, "venv_pack", None)  # as if not installed: importing it fails
    assert main(["package-env", "--output", "env.tar.gz"]) == 1
    assert capsys.readouterr().err == (
        "livectl package-env: venv-pack is not installed: pip install 'livectl[pack]' (or pip install venv-pack)\n"
    )


def test_an_installed_livectl_is_told_to_pass_a_checkout(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Installed from a wheel, the default --source (the folder above the package) holds no checkout."""
    monkeypatch.setattr(packenv, "REPO_ROOT", tmp_path)
    with pytest.raises(PackageEnvError) as e:
        check_options(PackOptions(source=tmp_path))
    assert str(e.value) == (
        f"--source: {tmp_path} is not a livectl checkout (no pyproject.toml); this livectl is installed, not a "
        "checkout: pass --source with a clone of livectl's repository"
    )


def test_spark_submit_flags_are_sparks_documented_form() -> None:
    flags = spark_submit_flags(Path("/srv/env.tar.gz"))
    assert flags[:2] == ["--archives", "/srv/env.tar.gz#environment"]
    assert "spark.pyspark.python=./environment/bin/python" in flags
