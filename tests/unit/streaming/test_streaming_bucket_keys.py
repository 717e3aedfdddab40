"""Bucket → grouping key (:mod:`streaming.query.bucket_keys`): one Spark shuffle partition per bucket, and each
checkpoint keeps the scheme its state was written under."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from shell_pipeline import ADMIN, BUCKETS, FakeGroupState, Pipeline, by_bucket

from core import events as ev
from core.codec.events import event_to_json
from streaming.query import routing, stateful
from streaming.query.bucket_keys import (
    CHECKPOINT_META,
    BucketKeys,
    bucket_of_key,
    checkpoint_scheme,
    group_keys,
    murmur3_int,
    spark_partition,
)
from streaming.query.validation import InputValidator
from streaming.runtime.checkpoint_fs import MemoryCheckpointStore, child

pytestmark = pytest.mark.unit

#: Spark 4.3's ``pmod(hash(cast(id as int)), n)`` for ids -1 … 7, read from a local session
#: (tests/spark/streaming/test_streaming_bucket_keys_spark.py checks the keys against Spark itself)
SPARK_PARTITIONS = {
    2: [1, 1, 1, 0, 1, 0, 0, 1, 1],
    8: [5, 7, 3, 6, 3, 6, 2, 1, 3],
}


def test_spark_partitions_of_int_keys() -> None:
    for n, expected in SPARK_PARTITIONS.items():
        assert [spark_partition(k, n) for k in range(-1, 8)] == expected
    # the reference vectors of Murmur3_x86_32.hashInt with Spark's seed 42
    assert murmur3_int(0) == 933211791 and murmur3_int(1) == -559580957


def test_identity_keys_collide_and_spread_keys_do_not() -> None:
    # the shipped 8 buckets as their own keys: five partitions for eight buckets, three of them in one
    identity = [spark_partition(k, 8) for k in group_keys(8, BucketKeys.IDENTITY)]
    assert identity == [7, 3, 6, 3, 6, 2, 1, 3]
    assert [spark_partition(k, 2) for k in group_keys(2, BucketKeys.IDENTITY)] == [1, 1]
    for n in range(1, 65):
        keys = group_keys(n)
        assert [spark_partition(k, n) for k in keys] == list(range(n))
        assert [bucket_of_key(k, n) for k in keys] == list(range(n))
        assert all(0 <= k < 2**31 for k in keys)
    assert group_keys(2) == (2, 1)


def test_bucket_of_key_keeps_the_rejected_group() -> None:
    assert bucket_of_key(-1, 8) == -1
    assert bucket_of_key(3, 8) == 3 and bucket_of_key(11, 8) == 3


def test_group_keys_refuse_no_buckets() -> None:
    with pytest.raises(ValueError, match="num_buckets: must be at least 1"):
        group_keys(0)


def test_a_new_checkpoint_gets_spread_keys_and_records_them() -> None:
    store = MemoryCheckpointStore()
    assert checkpoint_scheme(store, 4) is BucketKeys.SPREAD
    meta = json.loads(store.read_text(child(store.root, CHECKPOINT_META)))
    assert meta == {"version": 1, "num_buckets": 4, "bucket_keys": "spread"}
    # recorded: the checkpoint's batches do not change it later
    store.write_text(child(store.root, "offsets", "0"), "v1")
    assert checkpoint_scheme(store, 4) is BucketKeys.SPREAD


def test_a_checkpoint_with_batches_and_no_record_keeps_the_bucket_index_as_key() -> None:
    for used in ("offsets", "state"):
        store = MemoryCheckpointStore()
        store.write_text(child(store.root, CHECKPOINT_META), json.dumps({"version": 1, "num_buckets": 8}))
        store.write_text(child(store.root, used, "0"), "x")
        assert checkpoint_scheme(store, 8) is BucketKeys.IDENTITY
        meta = json.loads(store.read_text(child(store.root, CHECKPOINT_META)))
        assert meta == {"version": 1, "num_buckets": 8, "bucket_keys": "identity"}


def test_an_unknown_recorded_scheme_is_refused_naming_the_field() -> None:
    store = MemoryCheckpointStore()
    store.write_text(child(store.root, CHECKPOINT_META), json.dumps({"num_buckets": 2, "bucket_keys": "round"}))
    with pytest.raises(ValueError, match=r"bucket_keys: 'round' .* is not one of identity, spread"):
        checkpoint_scheme(store, 2)


def test_the_step_keyed_by_spread_keys_decides_as_keyed_by_bucket(tmp_path: Path, validator: InputValidator) -> None:
    p = Pipeline.failed_over(tmp_path, validator)
    saved = {b: s.value for b, s in p.states.items()}
    routed = pd.concat(
        [
            routing.prepare_frame(
                p.records([(ADMIN, event_to_json(ev.CreateTopic("r", "t", 3, 2)))]), BUCKETS, ADMIN, validator
            ),
            routing.tick_rows(1, BUCKETS),
        ]
    )
    keys = group_keys(BUCKETS)
    assert keys != tuple(range(BUCKETS))  # the test would show nothing otherwise

    def run(spread: bool) -> list[list[object]]:
        # make_step's function, as Spark calls it: (grouping key,), the group's frames, its state
        step = stateful.make_step(str(tmp_path), num_buckets=BUCKETS if spread else 0)
        out: list[list[object]] = []
        for bucket, frame in by_bucket(routed):
            gs = FakeGroupState()
            gs.value = saved[int(bucket)]
            key = keys[int(bucket)] if spread else int(bucket)
            for df in step((key,), iter([frame]), gs):
                out.extend(df[["bucket", "seq", "kind", "payload"]].values.tolist())
        return out

    spread, by_index = run(spread=True), run(spread=False)
    assert spread == by_index and any("LeaderAndIsr" in str(r[3]) for r in spread)
    assert {r[0] for r in spread} == set(range(BUCKETS))
