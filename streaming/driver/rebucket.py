"""Moving the controller to a new checkpoint, e.g. to change the bucket count (fixed for the life of a
checkpoint, :func:`streaming.driver.startup.resolve_buckets`).

With ``resume_from_checkpoint`` set to the old checkpoint's URI, a controller started on a *new* checkpoint
does a cold start from ZooKeeper — the source of truth: the failover snapshot rebuilds every bucket, in the
new count — but reads its input from where the old checkpoint's last committed micro-batch ended instead of
``starting_offsets``. The records after that point (commands and broker events no controller has handled
yet) wait behind the failover barrier (:mod:`streaming.source.kafka_source`) and are handled after the snapshot
is loaded, as on a takeover: the reference says so with ``"resumes": true``
(:func:`streaming.query.failover_refs.events_of`). Nothing is answered ``NOT_CONTROLLER`` and nothing is handled
twice.

Why not Spark's own offline state repartition (``spark._streamingCheckpointManager.repartition``, Spark
4.2+, experimental): it accepts ``applyInPandasWithState`` (tried with pyspark 4.3.0 and RocksDB), but it
moves each state row to ``hash(key) mod n`` and keeps the keys. A livectl key *is* the bucket,
``stable_hash(topic) mod num_buckets``, so after it the rows would still be keyed 0…7 while a 2-bucket
query routes topics to 0…1: the topics of the other six keys would have no state. Re-keying needs every
topic re-routed, which is what the cold start from ZooKeeper does.
"""

from __future__ import annotations

import json

from streaming.errors import StreamingError
from streaming.runtime.checkpoint_fs import CheckpointStore, batch_ids, child
from streaming.source.options import source_offset, split_offset

SETTING = "resume_from_checkpoint"


class ResumeError(StreamingError):
    """The old checkpoint cannot be resumed from; the message says why and what to do."""


def resume_offsets(old: CheckpointStore, new: CheckpointStore) -> str:
    """The input offsets where the old checkpoint's last committed micro-batch ended, as the JSON object
    ``{"topic": {"partition": offset}}`` the source takes for a new checkpoint.

    Refused (:class:`ResumeError`): the same checkpoint; a new checkpoint that already holds micro-batches
    (it is resumed from its own offsets: remove the setting); an old one without a committed micro-batch;
    an old one with a micro-batch planned but not committed — its controller stopped inside it, and only
    that checkpoint can replay it (start the controller on it once and stop it: ``livectl run`` stops
    between micro-batches)."""
    if old.root.rstrip("/") == new.root.rstrip("/"):
        raise ResumeError(f"{SETTING}: {old.root} is the checkpoint itself; name the one to move from")
    if batch_ids(new, child(new.root, "offsets")):
        raise ResumeError(
            f"{SETTING}: the checkpoint {new.root} already holds micro-batches; it resumes from its own "
            f"offsets (remove the setting, or choose an empty checkpoint_dir)"
        )
    planned = batch_ids(old, child(old.root, "offsets"))
    committed = batch_ids(old, child(old.root, "commits"))
    if not committed:
        raise ResumeError(f"{SETTING}: {old.root} has no committed micro-batch (is it a livectl checkpoint?)")
    if planned and planned[-1] > committed[-1]:
        raise ResumeError(
            f"{SETTING}: {old.root} has micro-batch {planned[-1]} planned but not committed; start the "
            f"controller on that checkpoint once so that it replays it, stop it, then move"
        )
    path = child(old.root, "offsets", str(committed[-1]))
    return offsets_of(old.read_text(path), path)


def offsets_of(text: str, path: str) -> str:
    """The source's end offsets in Spark's offset log entry ``text`` (``v1``, the batch's metadata, then one
    line per source; the controller's query has one), in canonical JSON."""
    lines = text.splitlines()
    if len(lines) != 3 or not lines[0].startswith("v"):
        raise ResumeError(f"{path}: not the offset log entry of a one-source query ({len(lines)} lines)")
    try:
        offsets = source_offset(*split_offset(json.loads(lines[2])))
    except (ValueError, AttributeError, TypeError) as e:
        raise ResumeError(f"{path}: the source's offsets are not {{topic: {{partition: offset}}}}: {e}") from None
    return json.dumps(offsets, sort_keys=True, separators=(",", ":"))
