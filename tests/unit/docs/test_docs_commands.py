"""Every command line the docs show can be run as written: ``livectl …``, ``livectl-simbrokers …``,
``python -m simbrokers …``, ``scripts/…`` and ``python -m bench NAME …`` lines in fenced blocks of README.md,
bench/README.md and docs/ are run with ``--help`` (exit 0), and every ``--option`` the line uses must be
one that help names. ``livectl conf path …`` is cheap and is run for real."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from docs_pages import ROOT, Block, blocks, pages

pytestmark = pytest.mark.unit

#: fenced blocks in these languages hold shell command lines (every block names its language: see below)
SHELL = {"bash", "sh", "shell", "console"}
#: the virtual environment the tests run in: its console scripts are the docs' ``.venv/bin/…``
BIN = Path(sys.executable).parent
_WORD = re.compile(r"^[a-z][a-z-]*$")
_SUBSHELL = re.compile(r"\$\(([^()]*)\)")


@dataclass(frozen=True)
class Command:
    """One documented command: where it is, the program and subcommand words, and the options it uses."""

    where: str
    argv: tuple[str, ...]
    options: tuple[str, ...]
    run_for_real: tuple[str, ...] = ()

    @property
    def help_argv(self) -> tuple[str, ...]:
        return (*self.argv, "--help")


def _logical_lines(block: Block) -> list[tuple[int, str]]:
    """The block's lines with ``\\``-continuations joined, each with the line number it starts on."""
    out: list[tuple[int, str]] = []
    pending = ""
    start = 0
    for offset, raw in enumerate(block.lines, start=1):
        if not pending:
            start = block.line + offset
        line = raw.rstrip()
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        out.append((start, pending + line))
        pending = ""
    if pending:
        out.append((start, pending))
    return out


def _tokens(text: str) -> list[str]:
    try:
        return shlex.split(text, comments=True)
    except ValueError:  # an unbalanced quote in an example: the plain words still name the command
        return text.split("#", 1)[0].split()


def _command(where: str, tokens: list[str]) -> Command | None:
    """The first command of ours on a line (after ``VAR=value``, ``export``, ``docker compose exec …``)."""
    for i, token in enumerate(tokens):
        name = token.removeprefix(".venv/bin/")
        rest = tokens[i + 1 :]
        if name in ("livectl", "livectl-simbrokers"):
            words: list[str] = []
            for word in rest:
                if not _WORD.match(word) or len(words) == 2:
                    break
                words.append(word)
            program = str(BIN / name)
            real = (program, *rest) if name == "livectl" and words[:2] == ["conf", "path"] else ()
            return Command(where, (program, *words), _options(rest), tuple(real))
        if name.startswith("scripts/"):
            return Command(where, (str(ROOT / name),), _options(rest))
        if name.endswith("python") and rest[:2] == ["-m", "simbrokers"]:
            return Command(where, (sys.executable, "-m", "simbrokers"), _options(rest[2:]))
        if name.endswith("python") and rest[:2] == ["-m", "bench"] and len(rest) > 2:
            # run from the checkout's root (as _run does), where ``bench`` is importable
            return Command(where, (sys.executable, "-m", "bench", rest[2]), _options(rest[3:]))
    return None


def _spark_submit(where: str, tokens: list[str]) -> list[Command]:
    """A ``spark-submit`` line that runs livectl's entry (a path ending in ``streaming/main.py``, the
    checkout's or a packed environment's): spark-submit's own options are checked against the virtual
    environment's ``spark-submit --help`` (as ``source .venv/bin/activate`` gives it), the entry's against
    ``python streaming/main.py --help``."""
    for i, token in enumerate(tokens):
        if Path(token).name != "spark-submit":
            continue
        rest = tokens[i + 1 :]
        app = next((j for j, t in enumerate(rest) if t.endswith("streaming/main.py")), None)
        if app is None:
            return []
        return [
            Command(where, (str(BIN / "spark-submit"),), _options(rest[:app])),
            Command(where, (sys.executable, str(ROOT / "streaming" / "main.py")), _options(rest[app + 1 :])),
        ]
    return []


def _options(tokens: list[str]) -> tuple[str, ...]:
    return tuple(t.split("=", 1)[0] for t in tokens if t.startswith("--") and len(t) > 2)


def documented_commands(page_list: list[Path]) -> list[Command]:
    """Every command of ours in the shell blocks of ``page_list``, ``$(…)`` substitutions included."""
    found: list[Command] = []
    for page in page_list:
        for block in blocks(page):
            if block.info.split(" ")[0] not in SHELL:
                continue
            for number, line in _logical_lines(block):
                where = f"{page.relative_to(ROOT)}:{number}"
                for text in [line, *_SUBSHELL.findall(line)]:
                    tokens = _tokens(_SUBSHELL.sub("SUBSHELL", text) if text is line else text)
                    command = _command(where, tokens)
                    if command is not None:
                        found.append(command)
                    found += _spark_submit(where, tokens)
    return found


def table_commands(page: Path) -> list[Command]:
    """The commands named in the first column of ``page``'s tables (``livectl local up\\|down\\|status``
    names three)."""
    found: list[Command] = []
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
        cell = re.match(r"^\| `([^`]+)` \|", line)
        if not cell:
            continue
        words = cell.group(1).split()
        last = words[-1].split("\\|") if words else []
        for choice in last:
            command = _command(f"{page.relative_to(ROOT)}:{number}", [*words[:-1], choice])
            if command is not None:
                found.append(command)
    return found


def _run(argv: tuple[str, ...]) -> tuple[int, str]:
    # the virtual environment first on PATH, as the docs' `source .venv/bin/activate` (spark-submit finds
    # Spark through the python it finds there)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    return done.returncode, done.stdout + done.stderr


def _problems(commands: list[Command]) -> list[str]:
    helps = sorted({c.help_argv for c in commands} | {c.run_for_real for c in commands if c.run_for_real})
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = dict(zip(helps, pool.map(_run, helps), strict=True))
    problems: list[str] = []
    for command in commands:
        shown = " ".join(Path(command.argv[0]).name if i == 0 else a for i, a in enumerate(command.help_argv))
        code, text = results[command.help_argv]
        if code != 0:
            problems.append(f"{command.where}: `{shown}` exits {code}: {text.strip()[-300:]}")
            continue
        for option in command.options:
            if not re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text):
                problems.append(f"{command.where}: `{shown}` does not know {option}")
        if command.run_for_real:
            code, text = results[command.run_for_real]
            if code != 0:
                problems.append(f"{command.where}: `{' '.join(command.run_for_real)}` exits {code}: {text.strip()}")
    return problems


def test_every_documented_command_runs_with_help_and_knows_its_options() -> None:
    commands = documented_commands(pages()) + table_commands(ROOT / "README.md")
    programs = {Path(c.argv[-1]).name if c.argv[0] == sys.executable else Path(c.argv[0]).name for c in commands}
    assert {
        "livectl",
        "livectl-simbrokers",
        "quickstart",
        "test",
        "simbrokers",
        "spark-submit",
        "main.py",
        "broker_failure",
    } <= programs, programs
    assert len(commands) > 40
    assert _problems(commands) == []


def test_every_fenced_block_names_its_language() -> None:
    """So that no shell block escapes the check above (a diagram is ``text``)."""
    unnamed = [f"{b.page.relative_to(ROOT)}:{b.line}" for page in pages() for b in blocks(page) if not b.info]
    assert unnamed == []


def test_the_readme_table_names_every_livectl_command() -> None:
    named = {c.argv[1] for c in table_commands(ROOT / "README.md") if Path(c.argv[0]).name == "livectl"}
    code, text = _run((str(BIN / "livectl"), "--help"))
    assert code == 0
    listed = set(re.findall(r"^    ([a-z][a-z-]*)(?= {2,}\S|$)", text, flags=re.MULTILINE))
    assert len(listed) > 10, text
    assert named == listed


def test_the_readme_opens_with_the_two_commands() -> None:
    first = blocks(ROOT / "README.md")[0]
    assert [line.split("#")[0].strip() for line in first.lines] == ["scripts/quickstart", "scripts/test"]


def test_a_wrong_command_or_option_is_reported() -> None:
    page = ROOT / "docs" / "example.md"  # named inside the repository only for its relative path
    block = Block(
        page,
        1,
        "bash",
        (
            "export X=1; .venv/bin/livectl topics --describe --topic t \\",
            "    --no-such-option 1   # a comment --not-an-option",
            'spark-submit --jars "$(livectl conf path jars/livectl-spark.jar)" main.py',
            "livectl no-such-command --wait",
            "echo not ours",
        ),
    )
    commands = [c for n, line in _logical_lines(block) if (c := _command(f"docs/example.md:{n}", _tokens(line)))]
    commands += [c for s in _SUBSHELL.findall(block.lines[2]) if (c := _command("docs/example.md:4", _tokens(s)))]
    assert [(Path(c.argv[0]).name, c.argv[1:], c.options) for c in commands] == [
        ("livectl", ("topics",), ("--describe", "--topic", "--no-such-option")),
        ("livectl", ("no-such-command",), ("--wait",)),
        ("livectl", ("conf", "path"), ()),
    ]
    problems = _problems(commands)
    assert len(problems) == 2, problems
    assert problems[0].startswith("docs/example.md:2: `livectl topics --help` does not know --no-such-option")
    assert problems[1].startswith("docs/example.md:5: `livectl no-such-command --help` exits 2")


def test_a_spark_submit_line_is_checked_against_spark_submit_and_livectls_entry() -> None:
    tokens = _tokens(
        "$SPARK_HOME/bin/spark-submit --master spark://h:7077 --conf a=b --jars x.jar "
        "environment/lib/python3.11/site-packages/streaming/main.py --controller-id 1 --zookeeper zk:2181"
    )
    commands = _spark_submit("docs/example.md:1", tokens)
    assert [(Path(c.argv[-1]).name, c.options) for c in commands] == [
        ("spark-submit", ("--master", "--conf", "--jars")),
        ("main.py", ("--controller-id", "--zookeeper")),
    ]
    assert _spark_submit("docs/example.md:1", _tokens("spark-submit --jars x.jar other.py --flag")) == []
    wrong = [Command("docs/example.md:1", commands[1].argv, ("--no-such-flag",))]
    (problem,) = _problems(wrong)
    assert problem.startswith("docs/example.md:1: `python ") and problem.endswith(
        "streaming/main.py --help` does not know --no-such-flag"
    )
