"""The value the public state-machine entry points return."""

from __future__ import annotations

from typing import NamedTuple

from core.context import ControllerContext
from core.decisions import Decision, StateChangeFailure


class StateChangeResult(NamedTuple):
    """``(context, decisions, failures)``: the new context (the input is not modified), the decisions
    (ZooKeeper writes then batched broker requests) and the per-item failures."""

    context: ControllerContext
    decisions: list[Decision]
    failures: list[StateChangeFailure]
