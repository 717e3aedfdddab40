"""The spread bucket keys in Spark itself: every bucket's group lands in a shuffle partition of its own (the
partitioning the stateful operator requires), and an old checkpoint keeps the bucket index as key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from streaming.query.bucket_keys import CHECKPOINT_META, group_keys
from streaming.query.pipeline import keyed_by_bucket
from streaming.settings import Settings

pytestmark = pytest.mark.spark


def _partitions(spark: Any, tmp_path: Path, n: int) -> dict[int, int]:
    settings = Settings.from_mapping({"checkpoint_dir": str(tmp_path / f"ck{n}"), "num_buckets": n})
    routed = spark.createDataFrame([(b, f"row of bucket {b}") for b in range(-1, n)], "bucket int, payload string")
    keyed = keyed_by_bucket(spark, routed, settings).repartition(n, "bucket")
    rows = keyed.selectExpr("bucket", "payload", "spark_partition_id() AS p").collect()
    return {int(r.payload.rsplit(" ", 1)[1]): int(r.p) for r in rows}


def test_each_bucket_has_a_shuffle_partition_of_its_own(spark: Any, tmp_path: Path) -> None:
    assert spark.sql("SELECT hash(0), hash(1)").first() == (933211791, -559580957)  # Murmur3, seed 42
    for n in (2, 8):
        placed = _partitions(spark, tmp_path, n)
        assert {b: placed[b] for b in range(n)} == {b: b for b in range(n)}
        meta = json.loads((tmp_path / f"ck{n}" / CHECKPOINT_META).read_text())
        assert meta["bucket_keys"] == "spread" and group_keys(n) != tuple(range(n))


def test_a_checkpoint_with_batches_and_no_record_keeps_the_bucket_index(spark: Any, tmp_path: Path) -> None:
    ck = tmp_path / "ck2"
    (ck / "offsets").mkdir(parents=True)
    (ck / "offsets" / "0").write_text("v1\n{}\n")
    placed = _partitions(spark, tmp_path, 2)
    assert placed[0] == placed[1] == 1  # Spark's hash puts keys 0 and 1 in one partition: as before
    assert json.loads((ck / CHECKPOINT_META).read_text())["bucket_keys"] == "identity"
