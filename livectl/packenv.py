"""``livectl package-env``: the packed virtual environment that Spark executors run livectl in.

Spark documents one way to give executors on other machines a Python environment: a packed virtual
environment passed with ``spark.archives`` (``--archives env.tar.gz#environment``), which every executor
unpacks into its working directory, and ``spark.pyspark.python=./environment/bin/python``. This module
builds that archive from a livectl checkout:

1. copies the checkout's sources (not ``.venv``, ``.git``, run data) into a scratch folder and builds a
   wheel of livectl there (``pip wheel --no-deps``), so the checkout is left untouched;
2. creates a fresh virtual environment with ``--python`` (default: this interpreter) and installs the
   wheel — livectl **non-editable**, with every dependency of ``pyproject.toml``;
3. checks that the environment imports what the executors run (livectl's packages, pyspark, pandas,
   pyarrow, great-expectations);
4. packs it with ``venv-pack`` into ``--output`` (``.tar.gz``, ``.tgz``, ``.tar`` or ``.zip``).

The archive holds the environment, not the interpreter: its ``bin/python`` is a link to the base
Python the environment was made with (``--python-prefix`` rewrites it for machines where that Python
lives elsewhere). Executors need that Python, at that path, and a Java runtime; nothing else.

By default pyspark's jars (~450 MB) are left out: an executor already runs inside a Spark JVM and its
Python workers import only pyspark's Python modules. ``--with-spark-jars`` keeps them (for an archive
that must also serve as a Spark installation).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

#: the checkout this livectl was installed from (editable install), if it is one
REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT = Path("dist") / "livectl-env.tar.gz"
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".zip")
#: what the executors' Python workers import; the build fails when one of them does not import
REQUIRED_MODULES = (
    "core",
    "streaming.query.stateful",
    "streaming.query.validation",
    "sinks",
    "pyspark",
    "pandas",
    "pyarrow",
    "great_expectations",
    "kazoo",
    "kafka",
    "orjson",
)
#: pyspark's JVM side, relative to the environment (fnmatch pattern for venv-pack)
SPARK_JARS_PATTERN = "lib/python*/site-packages/pyspark/jars/*"
#: never copied into the wheel build: environments, VCS data, run-time output
_NOT_SOURCES = (
    ".venv",
    ".git",
    "run",
    "checkpoints",
    "dist",
    "build",
    "__pycache__",
    "*.egg-info",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    ".hypothesis",
    "spark-warehouse",
)


class PackageEnvError(RuntimeError):
    """The environment could not be built or packed; the message names the option or step and why."""


@dataclass(frozen=True)
class PackOptions:
    """What ``livectl package-env`` is told. ``python`` makes the environment (default: this interpreter);
    ``python_prefix`` rewrites the archive's interpreter link (venv-pack's option)."""

    source: Path = REPO_ROOT
    output: Path = DEFAULT_OUTPUT
    python: str = sys.executable
    python_prefix: str | None = None
    with_spark_jars: bool = False
    compress_level: int = 1
    keep_build_dir: bool = False


@dataclass(frozen=True)
class PackResult:
    archive: Path
    size_bytes: int
    wheel: str
    python_version: str
    seconds: float


def check_options(o: PackOptions) -> None:
    """Raise :class:`PackageEnvError` naming the option when one is unusable, or saying in one line what is
    not installed (venv-pack, the ``pack`` extra) and how to get it."""
    if importlib.util.find_spec("venv_pack") is None:
        raise PackageEnvError("venv-pack is not installed: pip install 'livectl[pack]' (or pip install venv-pack)")
    pyproject = o.source / "pyproject.toml"
    if not pyproject.is_file():
        installed = (
            "; this livectl is installed, not a checkout: pass --source with a clone of livectl's repository"
            if o.source == REPO_ROOT
            else ""
        )
        raise PackageEnvError(f"--source: {o.source} is not a livectl checkout (no pyproject.toml){installed}")
    if 'name = "livectl"' not in pyproject.read_text():
        raise PackageEnvError(f'--source: {pyproject} is not livectl\'s (no name = "livectl")')
    if not o.output.name.endswith(ARCHIVE_SUFFIXES):
        raise PackageEnvError(f"--output: {o.output} must end in one of {', '.join(ARCHIVE_SUFFIXES)}")
    if not 0 <= o.compress_level <= 9:
        raise PackageEnvError(f"--compress-level: must be 0 to 9, got {o.compress_level}")
    if shutil.which(o.python) is None and not Path(o.python).is_file():
        raise PackageEnvError(f"--python: {o.python} is not an executable")
    if o.python_prefix is not None and not o.python_prefix.startswith("/"):
        raise PackageEnvError(f"--python-prefix: must be an absolute path, got {o.python_prefix}")


def _run(step: str, cmd: Sequence[str], log: Callable[[str], None], cwd: Path) -> str:
    log(f"{step}: {' '.join(cmd)}")
    proc = subprocess.run(list(cmd), capture_output=True, text=True, check=False, cwd=cwd)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise PackageEnvError(f"{step} failed (exit {proc.returncode}):\n{tail}")
    return proc.stdout


def build(o: PackOptions, log: Callable[[str], None] = lambda _m: None) -> PackResult:
    """Build the environment and pack it into ``o.output`` (replaced if it exists). The scratch folder is
    removed afterwards unless ``keep_build_dir``."""
    check_options(o)
    import venv_pack  # the `pack` extra: check_options said how to install it when it is missing

    started = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix="livectl-package-env-"))
    try:
        src = scratch / "src"
        shutil.copytree(o.source, src, ignore=shutil.ignore_patterns(*_NOT_SOURCES), symlinks=True)
        wheels = scratch / "wheels"
        _run(
            "building the livectl wheel",
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--wheel-dir", str(wheels), str(src)],
            log,
            scratch,
        )
        built = sorted(wheels.glob("livectl-*.whl"))
        if len(built) != 1:
            raise PackageEnvError(f"building the livectl wheel gave {[p.name for p in built]}, expected one wheel")
        env = scratch / "env"
        _run("creating the environment", [o.python, "-m", "venv", str(env)], log, scratch)
        env_python = str(env / "bin" / "python")
        _run(
            "installing livectl and its dependencies",
            [env_python, "-m", "pip", "install", "-q", "--disable-pip-version-check", str(built[0])],
            log,
            scratch,
        )
        # -I: isolated, so neither the working directory nor PYTHONPATH can supply a module the archive lacks
        check = "import importlib, sys; [importlib.import_module(m) for m in sys.argv[1:]]"
        _run("checking the environment", [env_python, "-I", "-c", check, *REQUIRED_MODULES], log, scratch)
        facts = "import json, sys, streaming; print(json.dumps([sys.version.split()[0], streaming.__file__]))"
        out = _run("checking the environment", [env_python, "-I", "-c", facts], log, scratch)
        version, where = json.loads(out.strip().splitlines()[-1])
        # livectl must come from the environment itself (installed from the wheel), not from a checkout
        if not str(where).startswith(str(env)):
            raise PackageEnvError(f"checking the environment: livectl imports from {where}, not from {env}")
        filters = [] if o.with_spark_jars else [("exclude", SPARK_JARS_PATTERN)]
        o.output.parent.mkdir(parents=True, exist_ok=True)
        log(f"packing {env} into {o.output} (venv-pack, compress level {o.compress_level})")
        try:
            venv_pack.pack(
                prefix=str(env),
                output=str(o.output),
                force=True,
                compress_level=o.compress_level,
                python_prefix=o.python_prefix,
                filters=filters,
            )
        except Exception as e:  # venv-pack's own exception type is not part of its API
            raise PackageEnvError(f"packing with venv-pack failed: {e}") from None
        return PackResult(
            archive=o.output.resolve(),
            size_bytes=o.output.stat().st_size,
            wheel=built[0].name,
            python_version=version,
            seconds=time.monotonic() - started,
        )
    finally:
        if o.keep_build_dir:
            log(f"build folder kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


def spark_submit_flags(archive: Path) -> list[str]:
    """The ``spark-submit`` options that give executors the packed environment (Spark's documented form).
    In client mode the driver's working directory must hold the same environment unpacked as
    ``environment`` (``tar -xzf <archive> -C environment``): the driver runs in it, and the driver's JVM
    starts Python with ``spark.pyspark.python`` too (a Python data source is planned beside the driver)."""
    return [
        "--archives",
        f"{archive}#environment",
        "--conf",
        "spark.pyspark.python=./environment/bin/python",
        "--conf",
        "spark.pyspark.driver.python=./environment/bin/python",
    ]


def _cmd(args: argparse.Namespace) -> int:
    o = PackOptions(
        source=args.source.resolve(),
        output=args.output,
        python=args.python,
        python_prefix=args.python_prefix,
        with_spark_jars=args.with_spark_jars,
        compress_level=args.compress_level,
        keep_build_dir=args.keep_build_dir,
    )
    try:
        result = build(o, log=(lambda m: print(f"==> {m}", flush=True)) if not args.quiet else (lambda _m: None))
    except PackageEnvError as e:
        print(f"livectl package-env: {e}", file=sys.stderr)
        return 1
    print(
        f"{result.archive}: {result.size_bytes / 1e6:.0f} MB, {result.wheel} on Python {result.python_version}, "
        f"built in {result.seconds:.0f} s"
    )
    print(f"on the driver machine: mkdir environment && tar -xzf {result.archive} -C environment")
    print(
        "then spark-submit "
        + " ".join(spark_submit_flags(result.archive))
        + " environment/lib/python*/site-packages/streaming/main.py …"
    )
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "package-env",
        help="pack livectl and its dependencies into an archive for Spark executors (spark.archives)",
        description="The packed virtual environment that Spark executors run livectl in: livectl built as a wheel "
        "and installed with its dependencies into a fresh virtual environment, packed with venv-pack for "
        "spark.archives (--archives env.tar.gz#environment).",
    )
    p.add_argument("--output", "-o", type=Path, default=DEFAULT_OUTPUT, help="archive to write (default: %(default)s)")
    p.add_argument(
        "--source", type=Path, default=REPO_ROOT, help="livectl checkout to build the wheel from (default: %(default)s)"
    )
    p.add_argument(
        "--python", default=sys.executable, help="interpreter that makes the environment (default: %(default)s)"
    )
    p.add_argument("--python-prefix", default=None, help="prefix of the Python on the executors, if it lives elsewhere")
    p.add_argument("--with-spark-jars", action="store_true", help="keep pyspark's jars in the archive (~450 MB more)")
    p.add_argument("--compress-level", type=int, default=1, help="gzip level 0-9 (default: %(default)s)")
    p.add_argument("--keep-build-dir", action="store_true", help="keep the scratch folder (wheel, environment)")
    p.add_argument("--quiet", "-q", action="store_true", help="print only the result")
    p.set_defaults(func=_cmd)
