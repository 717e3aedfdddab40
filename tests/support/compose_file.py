"""The repository's ``docker-compose.yml`` read as the deploy tests check it: its services and a controller
service's ``spark-submit`` line taken apart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker-compose.yml"


def load() -> dict[str, Any]:
    doc = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(doc, dict)
    return doc


def services() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = load()["services"]
    return out


def controller_parts(svc: dict[str, Any]) -> tuple[dict[str, list[str]], str, list[str]]:
    """``(spark-submit options, application file, application arguments)`` of a controller service."""
    cmd = [str(x) for x in svc["command"]]
    app = next(i for i, x in enumerate(cmd) if x.endswith(".py"))
    opts: dict[str, list[str]] = {}
    it = iter(cmd[:app])
    for flag in it:
        assert flag.startswith("--"), cmd
        opts.setdefault(flag, []).append(next(it))
    return opts, cmd[app], cmd[app + 1 :]
