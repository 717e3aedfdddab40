"""The JSON files of Kafka's tools: reassignment (read with errors naming the file and field, and generated),
topics-to-move and election files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from admin import files
from core.errors import FormatError
from core.model import ElectionType, TopicPartition

pytestmark = pytest.mark.unit


def test_reassignment_file_errors_name_the_file_and_field(tmp_path: Path) -> None:
    f = tmp_path / "r.json"
    f.write_text('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any","any"]}]}')
    [target] = files.read_reassignment(f, "rid")
    assert (target.topic, target.partition, target.replicas) == ("t", 0, (1, 2))
    for text, field in [
        ('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[]}]}', "partitions[0].replicas"),
        ('{"version":1,"partitions":[{"topic":"t","partition":-1,"replicas":[1]}]}', "partitions[0].partition"),
        ('{"version":2,"partitions":[]}', "version"),
        ('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1],"log_dirs":["/d"]}]}',
         "partitions[0].log_dirs"),
        ("[1]", "$"),
    ]:  # fmt: skip
        f.write_text(text)
        with pytest.raises(FormatError) as e:
            files.read_reassignment(f, "rid")
        assert e.value.field == f"{f}: {field}", text
    with pytest.raises(FormatError) as e:
        files.read_reassignment(tmp_path / "missing.json", "rid")
    assert "cannot read the file" in e.value.reason


def test_topics_to_move_and_election_files(tmp_path: Path) -> None:
    f = tmp_path / "m.json"
    f.write_text('{"version":1,"topics":[{"topic":"a"},{"topic":"b"}]}')
    assert files.read_topics_to_move(f) == ["a", "b"]
    f.write_text('{"partitions":[{"topic":"a","partition":1}]}')
    ev = files.read_election(f, "rid", ElectionType.PREFERRED)
    assert ev.partitions == (TopicPartition("a", 1),)
    f.write_text('{"partitions":[]}')
    with pytest.raises(FormatError):
        files.read_election(f, "rid", ElectionType.PREFERRED)


def test_generated_json_is_kafkas_format() -> None:
    text = files.reassignment_json({TopicPartition("t", 1): (2, 3), TopicPartition("t", 0): (1, 2)})
    assert json.loads(text) == {
        "version": 1,
        "partitions": [
            {"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]},
            {"topic": "t", "partition": 1, "replicas": [2, 3], "log_dirs": ["any", "any"]},
        ],
    }
