"""Kafka's JSON files for the admin tools, decoded with core's strict decoders.

* reassignment (``--reassignment-json-file``): ``{"version":1,"partitions":[{"topic","partition","replicas",
  "log_dirs"?}]}``; ``log_dirs``, when given, must list ``"any"`` once per replica (livectl does not place
  replicas on log directories);
* topics to move (``--topics-to-move-json-file``): ``{"version":1,"topics":[{"topic":"foo"}]}``;
* election (``--path-to-json-file``): ``{"partitions":[{"topic","partition"}]}``.

Errors are :class:`core.errors.FormatError` whose field is prefixed with the file name.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from core import jsonform as jf
from core.codec.events import decode_event
from core.codec.values import validate_topic_name
from core.errors import FormatError
from core.events import CancelReassignment, ElectLeaders, ReassignPartitions
from core.kafka import zkdata
from core.model import ElectionType, PartitionTarget, TopicPartition


def _load(path: Path) -> Any:
    name = str(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise FormatError(name, f"cannot read the file: {e.strerror or e}") from None
    try:
        return json.loads(text)
    except ValueError as e:
        raise FormatError(name, f"not valid JSON: {e}") from None


def _in_file(path: Path, e: FormatError) -> FormatError:
    return FormatError(f"{path}: {e.field}", e.reason)


def read_reassignment(path: Path, request_id: str) -> tuple[PartitionTarget, ...]:
    raw = _load(path)
    try:
        o = jf.obj(raw, "$")
        if o.get("version") is not None and jf.integer(o, "version") != 1:
            raise FormatError("version", f"unsupported version {o['version']}; Kafka's format is version 1")
        entries = jf.obj_list(o, "partitions")
        for i, e in enumerate(entries):
            dirs = e.get("log_dirs")
            if dirs is None:
                continue
            reps = e.get("replicas")
            if not isinstance(dirs, list) or (isinstance(reps, list) and len(dirs) != len(reps)):
                raise FormatError(f"partitions[{i}].log_dirs", "must list one log directory per replica")
            if any(d != "any" for d in dirs):
                reason = 'livectl does not place replicas on log directories; use "any"'
                raise FormatError(f"partitions[{i}].log_dirs", reason)
        body = {
            "version": 1,
            "type": ReassignPartitions.TYPE,
            "request_id": request_id,
            "partitions": [{k: v for k, v in e.items() if k != "log_dirs"} for e in entries],
        }
        event = decode_event(body)
    except FormatError as e:
        raise _in_file(path, e) from None
    assert isinstance(event, ReassignPartitions)
    return event.partitions


def cancel_command(path: Path, request_id: str) -> CancelReassignment:
    targets = read_reassignment(path, request_id)
    return CancelReassignment(request_id, tuple(TopicPartition(t.topic, t.partition) for t in targets))


def read_topics_to_move(path: Path) -> list[str]:
    raw = _load(path)
    try:
        o = jf.obj(raw, "$")
        topics = []
        for i, e in enumerate(jf.obj_list(o, "topics")):
            topics.append(validate_topic_name(jf.string(e, "topic", f"topics[{i}]."), f"topics[{i}].topic"))
        if not topics:
            raise FormatError("topics", "must list at least one topic")
    except FormatError as e:
        raise _in_file(path, e) from None
    return topics


def read_election(path: Path, request_id: str, election_type: ElectionType) -> ElectLeaders:
    raw = _load(path)
    try:
        o = jf.obj(raw, "$")
        if not jf.obj_list(o, "partitions"):
            raise FormatError("partitions", "must list at least one partition")
        event = decode_event(
            {
                "version": 1,
                "type": ElectLeaders.TYPE,
                "request_id": request_id,
                "election_type": election_type.value,
                "partitions": o["partitions"],
            }
        )
    except FormatError as e:
        raise _in_file(path, e) from None
    assert isinstance(event, ElectLeaders)
    return event


def reassignment_json(assignment: dict[TopicPartition, tuple[int, ...]], *, with_log_dirs: bool = True) -> str:
    """Kafka's reassignment JSON, as ``kafka-reassign-partitions --generate`` prints it."""
    targets = (PartitionTarget(tp.topic, tp.partition, reps) for tp, reps in assignment.items())
    return zkdata.encode_reassignment(targets, log_dirs=with_log_dirs)
