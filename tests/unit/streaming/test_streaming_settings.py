"""Settings: overrides and their errors, and the bucket count fixed by the checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest
from shell_pipeline import store_at

from streaming.settings import Settings, SettingsError

pytestmark = pytest.mark.unit


def test_settings_load_overrides_and_errors(tmp_path: Path) -> None:
    s = Settings.load(overrides=["num_buckets=16", "zookeeper_connect=zk:2181/livectl"])
    assert s.num_buckets == 16 and s.zookeeper_connect == "zk:2181/livectl"
    with pytest.raises(SettingsError) as e:
        Settings.load(overrides=["no_such_key=1"])
    assert e.value.key == "no_such_key"
    with pytest.raises(SettingsError) as e:
        Settings.load(overrides=["num_buckets=many"])
    assert e.value.key == "num_buckets"


class FakeConf:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def get(self, key: str) -> str:
        return self.values[key]

    def set(self, key: str, value: str) -> None:
        self.values[key] = value


class FakeSpark:
    def __init__(self, shuffle_partitions: int) -> None:
        self.conf = FakeConf({"spark.sql.shuffle.partitions": str(shuffle_partitions)})


def test_bucket_count_follows_spark_and_is_fixed_by_the_checkpoint(tmp_path: Path) -> None:
    from streaming.startup import resolve_buckets

    base = Settings.from_mapping({"checkpoint_dir": str(tmp_path / "ck"), "num_buckets": 0})
    spark = FakeSpark(6)
    store = store_at(tmp_path / "ck")
    assert resolve_buckets(spark, base, store).num_buckets == 6
    # later starts keep the checkpoint's count, and set Spark's shuffle partitions to it
    spark = FakeSpark(200)
    assert resolve_buckets(spark, base, store).num_buckets == 6
    assert spark.conf.values["spark.sql.shuffle.partitions"] == "6"
    with pytest.raises(SettingsError) as e:
        resolve_buckets(
            FakeSpark(6), Settings.from_mapping({"checkpoint_dir": str(tmp_path / "ck"), "num_buckets": 8}), store
        )
    assert e.value.key == "num_buckets" and "fixed for the life of a checkpoint" in e.value.reason
