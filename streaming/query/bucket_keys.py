"""Which Spark task runs each bucket: the grouping key of ``applyInPandasWithState``.

Spark places a group of ``groupBy(key).applyInPandasWithState`` in the shuffle partition (and state store,
and task) ``pmod(murmur3(key, seed 42), spark.sql.shuffle.partitions)`` — its ``HashPartitioning``. With the
bucket index itself as the key, buckets collide: of 8 buckets in 8 partitions, buckets 1, 3 and 7 share
partition 3 and 2, 4 share partition 6, while 3 partitions stay empty; with 2 buckets both land in
partition 1, so one task runs all the Python work on one core while the other core idles
(``docs/decisions/2026-11-24-spread-bucket-keys.md``). The ``spread`` keys fix that: bucket ``b`` of ``n`` is keyed by
the smallest ``k ≥ 0`` with ``k ≡ b (mod n)`` whose partition is ``b``, so every bucket has a partition of
its own and ``k mod n`` gives the bucket back. Rejected records keep key ``-1``.

A checkpoint's state is stored under its keys, so the scheme is fixed per checkpoint and recorded in its
``livectl.json`` (:func:`checkpoint_scheme`): a new checkpoint uses ``spread``; a checkpoint that already
holds batches without that record was made with the bucket index as key (``identity``) and keeps it.
"""

from __future__ import annotations

import enum
import functools
import json
from typing import Any

from streaming.runtime.checkpoint_fs import CheckpointStore, batch_ids, child

__all__ = [
    "CHECKPOINT_META",
    "BucketKeys",
    "bucket_of_key",
    "checkpoint_meta",
    "checkpoint_scheme",
    "group_keys",
    "murmur3_int",
    "pin_scheme",
    "spark_partition",
]

#: livectl's own record beside Spark's files in the checkpoint (bucket count and key scheme)
CHECKPOINT_META = "livectl.json"
#: the field of :data:`CHECKPOINT_META` naming the scheme
META_FIELD = "bucket_keys"
#: Spark's seed for ``HashPartitioning`` (and the SQL ``hash`` function)
_SEED = 42
_M32 = 0xFFFFFFFF


class BucketKeys(enum.Enum):
    """How a bucket index becomes its grouping key."""

    #: the key is the bucket index (checkpoints made before the spread keys)
    IDENTITY = "identity"
    #: one shuffle partition per bucket (:func:`group_keys`)
    SPREAD = "spread"


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def murmur3_int(value: int, seed: int = _SEED) -> int:
    """Spark's ``Murmur3_x86_32.hashInt`` of a 32-bit int: the hash ``HashPartitioning`` takes of an int key."""
    k = (value & _M32) * 0xCC9E2D51 & _M32
    k = _rotl(k, 15) * 0x1B873593 & _M32
    h = _rotl(seed & _M32 ^ k, 13)
    h = (h * 5 + 0xE6546B64) & _M32
    h ^= 4
    h ^= h >> 16
    h = h * 0x85EBCA6B & _M32
    h ^= h >> 13
    h = h * 0xC2B2AE35 & _M32
    h ^= h >> 16
    return h - (1 << 32) if h >= 1 << 31 else h


def spark_partition(key: int, partitions: int) -> int:
    """The shuffle partition Spark gives an int grouping key (``pmod(hash, partitions)``)."""
    return murmur3_int(key) % partitions


@functools.cache
def group_keys(num_buckets: int, scheme: BucketKeys = BucketKeys.SPREAD) -> tuple[int, ...]:
    """The grouping key of each bucket ``0 … num_buckets - 1``, with ``num_buckets`` shuffle partitions."""
    if num_buckets < 1:
        raise ValueError(f"num_buckets: must be at least 1, got {num_buckets}")
    if scheme is BucketKeys.IDENTITY:
        return tuple(range(num_buckets))
    keys = []
    for b in range(num_buckets):
        k = b
        # each candidate's partition is uniform over num_buckets: about num_buckets tries per bucket
        while spark_partition(k, num_buckets) != b:
            k += num_buckets
            if k > 2**31 - 1:  # pragma: no cover - murmur3 reaches every partition long before
                raise ValueError(f"num_buckets: no int key lands bucket {b} in its own partition")
        keys.append(k)
    return tuple(keys)


def bucket_of_key(key: int, num_buckets: int) -> int:
    """The bucket index of a grouping key, under either scheme (the rejected group's ``-1`` stays)."""
    return key % num_buckets if key >= 0 else key


def checkpoint_meta(store: CheckpointStore) -> dict[str, Any] | None:
    """The content of the checkpoint's :data:`CHECKPOINT_META` (its bucket count, its key scheme), or
    ``None`` when the checkpoint has none yet."""
    meta = child(store.root, CHECKPOINT_META)
    if not store.exists(meta):
        return None
    data: dict[str, Any] = json.loads(store.read_text(meta))
    return data


def checkpoint_scheme(store: CheckpointStore, num_buckets: int) -> BucketKeys:
    """The key scheme of the checkpoint at ``store``, recorded in its :data:`CHECKPOINT_META` the first time
    (with ``num_buckets`` when that file is new): ``identity`` for a checkpoint that already holds batches
    without the record (made before it existed), ``spread`` for a new one."""
    return pin_scheme(store, num_buckets, checkpoint_meta(store))


def pin_scheme(store: CheckpointStore, num_buckets: int, data: dict[str, Any] | None) -> BucketKeys:
    """:func:`checkpoint_scheme` given the content of the checkpoint's :data:`CHECKPOINT_META` as the caller
    just read it (``None``: no such file), which is not read again."""
    meta = child(store.root, CHECKPOINT_META)
    recorded = data.get(META_FIELD) if data is not None else None
    if recorded is not None:
        try:
            return BucketKeys(recorded)
        except ValueError:
            raise ValueError(
                f"{META_FIELD}: {recorded!r} in {meta} is not one of {', '.join(s.value for s in BucketKeys)}"
            ) from None
    used = bool(batch_ids(store, child(store.root, "offsets"))) or store.exists(child(store.root, "state"))
    scheme = BucketKeys.IDENTITY if used else BucketKeys.SPREAD
    data = data if data is not None else {"version": 1, "num_buckets": num_buckets}
    store.write_text(meta, json.dumps({**data, META_FIELD: scheme.value}))
    return scheme
