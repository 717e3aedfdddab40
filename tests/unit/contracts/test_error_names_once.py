"""Kafka's error names and ZooKeeper's refusal names are spelled once: the product code names an error
through :class:`core.kafka.error_codes.KafkaError` (or :class:`~core.kafka.error_codes.ReassignmentOutcome`)
and a ZooKeeper refusal through :class:`sinks.ports.ZkCode`, so a misspelt name cannot reach a result."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from core.kafka.error_codes import KafkaError, ReassignmentOutcome
from sinks.ports import ZkCode

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[3]
PRODUCT = ("core", "streaming", "sinks", "admin", "livectl", "simbrokers", "channel")
#: the homes: the only files that may spell the names
HOMES = {Path("core/kafka/error_codes.py"), Path("sinks/ports.py")}


def _names() -> set[str]:
    return {e.name for e in KafkaError} | {e.value for e in ReassignmentOutcome} | {e.value for e in ZkCode}


def _spelled(path: Path, names: set[str]) -> set[str]:
    """The string constants of ``path`` that are exactly one of ``names`` (docstrings and messages that
    merely mention a name are longer strings and do not count)."""
    tree = ast.parse(path.read_text(), str(path))
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in names}


def test_the_names_are_spelled_only_in_their_homes() -> None:
    names = _names()
    found: dict[str, set[str]] = {}
    for package in PRODUCT:
        for path in sorted((REPO / package).rglob("*.py")):
            rel = path.relative_to(REPO)
            if rel in HOMES:
                continue
            spelled = _spelled(path, names)
            if spelled:
                found[str(rel)] = spelled
    assert found == {}, "name these errors through KafkaError / ReassignmentOutcome / ZkCode"


def test_the_homes_spell_every_name_and_the_scan_sees_them() -> None:
    # the scan is not vacuous: the homes themselves are where it finds the names
    names = _names()
    spelled = set().union(*(_spelled(REPO / home, names) for home in HOMES))
    assert {e.value for e in ZkCode} <= spelled
    assert {e.value for e in ReassignmentOutcome} <= spelled
    # KafkaError's names are its members' identifiers, not strings: the enum is the spelling
    assert KafkaError.NOT_CONTROLLER.name == "NOT_CONTROLLER"
    assert KafkaError["INVALID_REPLICA_ASSIGNMENT"] == 39


def test_zookeeper_codes_are_kazoo_exception_names() -> None:
    from kazoo import exceptions

    from sinks.zookeeper import error_name

    for code in ZkCode:
        assert error_name(getattr(exceptions, f"{code.value}Error")()) == code
