"""A dry run's answer in its admin result's ``details``: the decisions the controller's step made for the
command, each in its JSON form (:mod:`core.codec.decisions`), and the partitions it would change
(:func:`dry_run_details`, read back by :func:`read_dry_run`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from core import jsonform as jf
from core.codec.decisions import decode_decision, encode_decision
from core.decisions import Decision
from core.errors import FormatError
from core.frozen_json import thaw

#: the key of a dry run's decisions in its admin result's ``details`` (a list: the answers of several buckets
#: merge by concatenation, :func:`streaming.query.batch_rows.merge_admin_results`)
DRY_RUN_DECISIONS = "dry_run"
#: the key of the partitions a dry run would change, each as it would be after the command
DRY_RUN_PARTITIONS = "dry_run_partitions"


@dataclass(frozen=True)
class DryRunPartition:
    """One partition as a dry-run command would leave it: its assignment, state and leadership (``leader``
    -1, ``isr`` empty and ``leader_epoch`` -1 when it would have none: a partition a deletion removes)."""

    topic: str
    partition: int
    state: str
    replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    leader: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()


@dataclass(frozen=True)
class DryRun:
    """What an admin command run dry answered: the decisions the controller's step made for it (in the
    step's order, bucket after bucket) and the partitions it would change."""

    decisions: tuple[Decision, ...]
    partitions: tuple[DryRunPartition, ...]


def dry_run_details(decisions: Sequence[Decision], partitions: Sequence[DryRunPartition]) -> dict[str, Any]:
    """The ``details`` entries of a dry run's answer: its decisions in their JSON form
    (:func:`encode_decision`) and its partitions."""
    return {
        DRY_RUN_DECISIONS: [encode_decision(d) for d in decisions],
        DRY_RUN_PARTITIONS: [
            {f.name: list(v) if isinstance(v := getattr(p, f.name), tuple) else v for f in fields(p)}
            for p in partitions
        ],
    }


def read_dry_run(details: Mapping[str, Any]) -> DryRun | None:
    """The dry run an admin result's ``details`` carries, or ``None`` when it is no dry run's answer. Strict:
    a malformed entry raises :class:`FormatError` naming it."""
    raw = details.get(DRY_RUN_DECISIONS)
    if raw is None:
        return None
    if not isinstance(raw, list | tuple):
        raise FormatError(DRY_RUN_DECISIONS, f"must be a list, got {type(raw).__name__}")
    decisions = tuple(decode_decision(thaw(d), typed=True) for d in raw)
    rows = details.get(DRY_RUN_PARTITIONS, ())
    if not isinstance(rows, list | tuple):
        raise FormatError(DRY_RUN_PARTITIONS, f"must be a list, got {type(rows).__name__}")
    parts = []
    for i, row in enumerate(rows):
        pre = f"{DRY_RUN_PARTITIONS}[{i}]."
        o = jf.obj(thaw(row), pre.rstrip("."))
        parts.append(
            DryRunPartition(
                jf.string(o, "topic", pre),
                jf.integer(o, "partition", pre),
                jf.string(o, "state", pre),
                jf.int_list(o, "replicas", pre),
                jf.int_list(o, "adding_replicas", pre),
                jf.int_list(o, "removing_replicas", pre),
                jf.integer(o, "leader", pre),
                jf.integer(o, "leader_epoch", pre),
                jf.int_list(o, "isr", pre),
            )
        )
    return DryRun(decisions, tuple(parts))
