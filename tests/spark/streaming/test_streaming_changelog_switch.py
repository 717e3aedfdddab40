"""RocksDB changelog checkpointing (shipped on in ``spark-defaults.conf``) switched on for a checkpoint written
without it: the controller's query restarts on it, finds its buckets' state, and goes on in the new format."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from controller_harness import Cluster, start_controller
from waiting import wait_until

from core import events as ev
from streaming.query.stateful import load_state

pytestmark = pytest.mark.spark

CHANGELOG = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"


def state_files(checkpoint: str) -> tuple[set[str], set[str]]:
    """The RocksDB state store's snapshot (``.zip``) and changelog (``.changelog``) files of the checkpoint."""
    files = [p.name for p in Path(checkpoint, "state").rglob("*") if p.is_file()]
    return {f for f in files if f.endswith(".zip")}, {f for f in files if f.endswith(".changelog")}


def stored_topics(spark: Any, checkpoint: str) -> set[str]:
    """The topics in the buckets' state as stored at the checkpoint's last committed batch (Spark's state
    data source reads the store, snapshot and changelog files alike)."""
    rows = spark.read.format("statestore").load(checkpoint).collect()
    topics: set[str] = set()
    for row in rows:
        v = _state_struct(row["value"].asDict(recursive=True))
        topics |= load_state(v["format"], v["size"], bytes(v["blob"])).context.all_topics
    return topics


def _state_struct(value: dict[str, Any]) -> dict[str, Any]:
    """The bucket's state (``streaming.query.stateful.STATE_SCHEMA``) inside the stored value (Spark nests the
    group state of ``applyInPandasWithState`` in its own wrapper)."""
    if "blob" in value:
        return value
    for v in value.values():
        if isinstance(v, dict) and (found := _state_struct(v)):
            return found
    return {}


def test_changelog_checkpointing_switched_on_for_an_existing_checkpoint(spark: Any, cluster: Cluster) -> None:
    checkpoint = cluster.settings.checkpoint_dir
    before = spark.conf.get(CHANGELOG, "false")
    try:
        for b in (1, 2, 3):
            cluster.register_broker(b)
        spark.conf.set(CHANGELOG, "false")
        controller = start_controller(spark, cluster.settings)
        try:
            cluster.send_admin(ev.CreateTopic("c1", "kept", 2, 3, replica_assignment=((1, 2, 3), (2, 3, 1))))
            wait_until("kept online", lambda: all(cluster.state("kept", p) for p in (0, 1)), timeout=180)
        finally:
            controller.stop()
        assert not controller.error
        zips, changelogs = state_files(checkpoint)
        assert zips and not changelogs, "without the setting every commit uploads a snapshot"
        assert stored_topics(spark, checkpoint) == {"kept"}

        # the same checkpoint, now with changelog checkpointing (as shipped)
        spark.conf.set(CHANGELOG, "true")
        controller = start_controller(spark, cluster.settings)
        try:
            cluster.send_admin(ev.CreateTopic("c2", "added", 1, 3, replica_assignment=((3, 1, 2),)))
            wait_until("added online", lambda: cluster.state("added", 0), timeout=180)
            # broker 1 dies: partition 0 of the topic made before the switch moves to broker 2
            cluster.kill_broker(1)
            wait_until("kept/0 re-elected", lambda: (s := cluster.state("kept", 0)) and s["leader"] == 2)
        finally:
            controller.stop()
        assert not controller.error
        _, changelogs = state_files(checkpoint)
        assert changelogs, "with the setting the commits write changelog files"
        assert stored_topics(spark, checkpoint) == {"kept", "added"}

        # and a third run loads the state from the mixed files (snapshot + changelog replay)
        controller = start_controller(spark, cluster.settings)
        try:
            cluster.send_admin(ev.CreateTopic("c3", "third", 1, 2, replica_assignment=((2, 3),)))
            wait_until("third online", lambda: cluster.state("third", 0), timeout=180)
        finally:
            controller.stop()
        assert not controller.error
        assert stored_topics(spark, checkpoint) == {"kept", "added", "third"}
        s = cluster.state("kept", 0)
        assert s is not None and s["leader"] == 2 and s["isr"] == [2, 3]
    finally:
        spark.conf.set(CHANGELOG, before)
