"""Whether a controller that lost its place wrote anything: the checks of the fencing and partition tests.

The output topics' messages by epoch (``controllerEpoch`` on requests, ``controller_epoch`` on admin results
and rejected records), the ZooKeeper tree's change ids, and the one line a fenced ``livectl run`` exits with.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer, TopicPartition
from kazoo.exceptions import NoNodeError


def messages(bootstrap: str, topic: str) -> dict[int, list[dict[str, Any]]]:
    """Every message of ``topic``, per partition in offset order, as JSON."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        out: dict[int, list[dict[str, Any]]] = {tp.partition: [] for tp in tps}
        quiet_polls = 0
        while quiet_polls < 5:
            got = consumer.poll(timeout_ms=300)
            quiet_polls = 0 if got else quiet_polls + 1
            for tp, records in got.items():
                out[tp.partition].extend(json.loads(r.value) for r in records)
        return out
    finally:
        consumer.close()


def epoch_of(message: dict[str, Any]) -> int:
    return int(message["controllerEpoch"] if "controllerEpoch" in message else message["controller_epoch"])


def old_epoch_after_new(per_partition: dict[int, list[dict[str, Any]]], old: int, new: int) -> list[dict[str, Any]]:
    """Messages stamped ``old`` that come after the first message stamped ``new`` in their partition."""
    late = []
    for messages in per_partition.values():
        first_new = next((i for i, m in enumerate(messages) if epoch_of(m) >= new), len(messages))
        late += [m for m in messages[first_new:] if epoch_of(m) == old]
    return late


def tree(zk: Any, path: str = "/") -> dict[str, tuple[int, int]]:
    """Every znode under ``path`` (the cluster's chroot) with its data and children change ids."""
    out: dict[str, tuple[int, int]] = {}
    try:
        children = zk.get_children(path)
    except NoNodeError:  # deleted since its parent listed it
        return out
    for child in children:
        full = f"{path.rstrip('/')}/{child}"
        stat = zk.exists(full)
        if stat is None:
            continue
        out[full] = (stat.mzxid, stat.pzxid)
        out.update(tree(zk, full))
    return out


def writes_not_by(zk: Any, before: dict[str, tuple[int, int]], epoch: int) -> list[str]:
    """Znodes created, changed or deleted since ``before`` whose data does not carry ``epoch`` (every sink
    transaction also sets the progress znode with the writer's epoch; states carry their writer's)."""
    after = tree(zk)
    out = [f"deleted {path}" for path in sorted(set(before) - set(after))]
    for path, ids in sorted(after.items()):
        if before.get(path) == ids:
            continue
        if before.get(path, (None,))[0] == ids[0]:
            out.append(f"children of {path} changed")
            continue
        data = zk.get(path)[0]
        try:
            stamped = json.loads(data).get("controller_epoch") if data else None
        except ValueError:
            stamped = None
        if stamped != epoch:
            out.append(f"{path} written (controller_epoch {stamped})")
    return out


def batch_ids(folder: Path) -> set[int]:
    return {int(f.name) for f in folder.glob("*") if f.name.isdigit()} if folder.is_dir() else set()


def between_batches(checkpoint: Path) -> bool:
    """No micro-batch in flight: the last one planned (``offsets/N``) is committed (``commits/N``)."""
    planned = batch_ids(checkpoint / "offsets")
    return bool(planned) and max(planned) in batch_ids(checkpoint / "commits")


def check_fenced_exit(a: Any, mark: int) -> None:
    """``a`` (resumed at log offset ``mark``) exits with code 3 and one line saying it was fenced: nothing
    else on its stdout and stderr (the harness sends both to one file), no Spark or py4j traceback."""
    rc = a.proc.wait(120)
    resumed = a.text()[mark:]
    assert rc == 3, resumed
    for noise in ("Traceback", "CONCURRENT_STREAM_LOG_UPDATE", "py4j", "Py4J"):
        assert noise not in resumed, resumed
    lines = [line for line in resumed.splitlines() if line.strip()]
    assert len(lines) == 1, resumed
    assert lines[0].startswith("livectl run: controller ") and "was fenced" in lines[0], resumed


def epoch_counts(bootstrap: str, topics: dict[str, str], epoch: int) -> dict[str, int]:
    """How many messages stamped ``epoch`` each output topic holds."""
    return {
        name: sum(1 for msgs in messages(bootstrap, topics[name]).values() for x in msgs if epoch_of(x) == epoch)
        for name in ("requests", "results", "rejected")
    }
