"""Settings: overrides and their errors, and the bucket count fixed by the checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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

    @property
    def getAll(self) -> dict[str, str]:
        return dict(self.values)

    def get(self, key: str) -> str:
        return self.values[key]

    def set(self, key: str, value: str) -> None:
        self.values[key] = value


class FakeSparkConf:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def getAll(self) -> list[tuple[str, str]]:
        return list(self.values.items())


class FakeContext:
    def __init__(self, conf: dict[str, str], default_parallelism: int) -> None:
        self.conf, self.defaultParallelism = FakeSparkConf(conf), default_parallelism

    def getConf(self) -> FakeSparkConf:
        return self.conf


class FakeSpark:
    def __init__(
        self, shuffle_partitions: int | None, master: str = "local[2]", context: dict[str, str] | None = None
    ) -> None:
        set_here = {} if shuffle_partitions is None else {"spark.sql.shuffle.partitions": str(shuffle_partitions)}
        self.conf = FakeConf(set_here)
        self.sparkContext = FakeContext({"spark.master": master, **(context or {})}, default_parallelism=2)


def test_bucket_count_follows_spark_and_is_fixed_by_the_checkpoint(tmp_path: Path) -> None:
    from streaming.driver.startup import resolve_buckets

    base = Settings.from_mapping({"checkpoint_dir": str(tmp_path / "ck"), "num_buckets": 0})
    spark = FakeSpark(6)
    store = store_at(tmp_path / "ck")
    assert resolve_buckets(spark, base, store).num_buckets == 6
    # later starts keep the checkpoint's count, and set Spark's shuffle partitions to it
    spark = FakeSpark(200)
    assert resolve_buckets(spark, base, store).num_buckets == 6
    assert spark.conf.values["spark.sql.shuffle.partitions"] == "6"
    spark = FakeSpark(None, master="local[8]")
    assert resolve_buckets(spark, base, store).num_buckets == 6
    with pytest.raises(SettingsError) as e:
        resolve_buckets(
            FakeSpark(6), Settings.from_mapping({"checkpoint_dir": str(tmp_path / "ck"), "num_buckets": 8}), store
        )
    assert e.value.key == "num_buckets" and "fixed for the life of a checkpoint" in e.value.reason


def test_a_new_checkpoint_gets_one_bucket_per_executor_core_unless_told(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from streaming.driver.startup import resolve_buckets

    made = iter(range(100))

    def new(spark: FakeSpark, num_buckets: int = 0) -> int:
        name = f"ck{next(made)}"
        s = Settings.from_mapping({"checkpoint_dir": str(tmp_path / name), "num_buckets": num_buckets})
        buckets = resolve_buckets(spark, s, store_at(tmp_path / name)).num_buckets
        assert spark.conf.values["spark.sql.shuffle.partitions"] == str(buckets)
        return buckets

    caplog.set_level("INFO", logger="livectl.app")
    assert new(FakeSpark(None, "local[2]")) == 2
    assert "2 state buckets (from master local[2])" in caplog.text
    assert new(FakeSpark(None, "local[3]")) == 3
    assert new(FakeSpark(None, "spark://m:7077", {"spark.cores.max": "12"})) == 12
    assert new(FakeSpark(None, "yarn", {"spark.executor.instances": "3", "spark.executor.cores": "4"})) == 12
    # a cluster that says nothing: the cores registered now (Spark's defaultParallelism)
    assert new(FakeSpark(None, "k8s://https://api:6443")) == 2
    # shuffle partitions set explicitly (--conf, a properties file, the builder) win over the cores
    assert new(FakeSpark(5, "local[2]")) == 5
    # and the setting over both
    assert new(FakeSpark(5, "local[2]"), num_buckets=7) == 7
    assert "7 state buckets (from the num_buckets setting)" in caplog.text


@pytest.mark.parametrize(
    ("master", "cores"),
    [
        ("local", 1),
        ("local[1]", 1),
        ("local[4]", 4),
        ("local[4, 3]", 4),
        ("local-cluster[2, 3, 1024]", 6),
    ],
)
def test_executor_cores_of_each_master_form(master: str, cores: int) -> None:
    from streaming.driver.startup import executor_cores

    assert executor_cores({"spark.master": master}, default_parallelism=99, cpu_count=16) == (cores, f"master {master}")


def test_local_star_counts_the_cores_spark_gave_it() -> None:
    from streaming.driver.startup import executor_cores

    # Spark's own count (in local mode defaultParallelism is the thread count it gave "*", from the JVM's
    # view of the CPUs), not the machine's
    assert executor_cores({"spark.master": "local[*]"}, default_parallelism=3, cpu_count=16) == (
        3,
        "master local[*] (Spark's defaultParallelism)",
    )
    # spark.default.parallelism set: defaultParallelism is that figure, not a core count
    conf = {"spark.master": "local[*]", "spark.default.parallelism": "40"}
    assert executor_cores(conf, default_parallelism=40, cpu_count=16) == (16, "master local[*]")


class CountingStore:
    """A checkpoint store that counts the reads of each file."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.reads: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def read_text(self, path: str) -> str:
        self.reads[path] = self.reads.get(path, 0) + 1
        return str(self.inner.read_text(path))


def test_the_checkpoint_meta_is_read_once_per_start(tmp_path: Path) -> None:
    import json

    from streaming.driver.startup import resolve_buckets
    from streaming.query.bucket_keys import CHECKPOINT_META, checkpoint_scheme
    from streaming.runtime.checkpoint_fs import child

    s = Settings.from_mapping({"checkpoint_dir": str(tmp_path / "once"), "num_buckets": 0})
    inner = store_at(tmp_path / "once")
    meta = child(inner.root, CHECKPOINT_META)
    for start in ("new", "used"):
        store = CountingStore(inner)
        assert resolve_buckets(FakeSpark(None, "local[2]"), s, store).num_buckets == 2, start
        assert store.reads.get(meta, 0) == (0 if start == "new" else 1), start
    # the bucket count and the key scheme, in one file written once
    assert json.loads(inner.read_text(meta)) == {"version": 1, "num_buckets": 2, "bucket_keys": "spread"}
    assert checkpoint_scheme(inner, 2).value == "spread"
