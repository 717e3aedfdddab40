"""The driver's class-data-sharing archive (streaming.runtime.class_archive): its key follows the Java runtime and
the driver's class path, ``livectl run`` maps it only when it was made, a user's own choice of archive is kept, a
failed make is said once — and a real JVM given the options starts whether or not the archive matches."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from pyspark import SparkConf

from streaming.driver.session import map_class_archive
from streaming.runtime import class_archive

pytestmark = pytest.mark.unit


def _environ(tmp_path: Path, jars: dict[str, int] | None = None) -> dict[str, str]:
    """An environment whose Java runtime and Spark are folders of ``tmp_path``: a ``lib/modules`` image and
    ``jars/*.jar`` (name: size)."""
    java = tmp_path / "java"
    (java / "lib").mkdir(parents=True, exist_ok=True)
    (java / "lib" / "modules").write_bytes(b"m" * 100)
    spark = tmp_path / "spark"
    (spark / "jars").mkdir(parents=True, exist_ok=True)
    for name, size in (jars or {"spark-core.jar": 10, "scala-library.jar": 20}).items():
        (spark / "jars" / name).write_bytes(b"j" * size)
    return {"JAVA_HOME": str(java), "SPARK_HOME": str(spark), "PATH": os.environ.get("PATH", "")}


def test_the_key_follows_the_java_runtime_and_the_driver_class_path(tmp_path: Path) -> None:
    env = _environ(tmp_path)
    key = class_archive.archive_key(env)
    assert key is not None and len(key) == 16
    assert class_archive.archive_key(dict(env)) == key  # the same runtime and class path: the same archive
    # a jar of Spark's grown (another Spark), the user's driver class path, Hadoop's conf folder, another Java
    (tmp_path / "spark" / "jars" / "spark-core.jar").write_bytes(b"j" * 11)
    grown = class_archive.archive_key(env)
    assert grown != key
    assert class_archive.archive_key(env, extra_class_path="/opt/extra.jar") not in (key, grown)
    assert class_archive.archive_key({**env, "HADOOP_CONF_DIR": "/etc/hadoop"}) not in (key, grown)
    other_java = _environ(tmp_path / "other")
    assert class_archive.archive_key({**env, "JAVA_HOME": other_java["JAVA_HOME"]}) not in (key, grown)


def test_no_key_without_a_java_runtime_or_spark_jars(tmp_path: Path) -> None:
    env = _environ(tmp_path)
    assert class_archive.archive_key({**env, "JAVA_HOME": str(tmp_path / "nowhere")}) is None
    empty = tmp_path / "empty-spark"
    empty.mkdir()
    assert class_archive.archive_key({**env, "SPARK_HOME": str(empty)}) is None


def test_an_archive_is_found_only_once_made(tmp_path: Path) -> None:
    key = "0123456789abcdef"
    assert class_archive.find(tmp_path, key) is None
    assert class_archive.find(tmp_path, None) is None
    class_archive.archive_path(tmp_path, key).write_bytes(b"")  # an empty file is not an archive
    assert class_archive.find(tmp_path, key) is None
    class_archive.archive_path(tmp_path, key).write_bytes(b"archive")
    assert class_archive.find(tmp_path, key) == class_archive.archive_path(tmp_path, key)


def test_a_users_own_archive_or_sharing_mode_is_kept() -> None:
    path = Path("/cache/k.jsa")
    assert class_archive.with_archive("", path) == f"-XX:SharedArchiveFile={path} -Xshare:auto"
    assert class_archive.with_archive("-Dx=1", path) == f"-Dx=1 -XX:SharedArchiveFile={path} -Xshare:auto"
    for own in ("-XX:SharedArchiveFile=/mine.jsa", "-Xshare:off", "-XX:ArchiveClassesAtExit=/new.jsa"):
        assert class_archive.with_archive(own, path) == own


def test_livectl_run_maps_the_archive_only_when_it_was_made(tmp_path: Path) -> None:
    env = _environ(tmp_path)
    folder = tmp_path / "cds"
    folder.mkdir()
    conf = SparkConf(loadDefaults=False).set("spark.driver.extraJavaOptions", "-Dlog4j.configurationFile=x")
    assert map_class_archive(conf, env, folder) is None
    assert conf.get("spark.driver.extraJavaOptions") == "-Dlog4j.configurationFile=x"
    key = class_archive.archive_key(env)
    assert key is not None
    made = class_archive.archive_path(folder, key)
    made.write_bytes(b"archive")
    assert map_class_archive(conf, env, folder) == made
    assert (
        conf.get("spark.driver.extraJavaOptions") == f"-Dlog4j.configurationFile=x {class_archive.java_options(made)}"
    )
    # a driver class path of the user's own is another class path: that archive is not this run's
    other = SparkConf(loadDefaults=False).set("spark.driver.extraClassPath", "/opt/extra.jar")
    assert map_class_archive(other, env, folder) is None


def test_a_failed_make_is_said_and_not_tried_again_at_once(tmp_path: Path) -> None:
    env = _environ(tmp_path)  # a Spark without bin/spark-submit: the job cannot start
    folder = tmp_path / "cds"
    with pytest.raises(class_archive.ClassArchiveError, match="spark-submit"):
        class_archive.ensure(folder, env, retry_after_s=3600)
    key = class_archive.archive_key(env)
    assert key is not None
    assert (folder / f"{key}.failed").exists()
    assert class_archive.find(folder, key) is None
    with pytest.raises(class_archive.ClassArchiveError, match="an attempt failed"):
        class_archive.ensure(folder, env, retry_after_s=3600)


@pytest.fixture(scope="module")
def hello_jars(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two jars holding the same main class, at two paths (two class paths)."""
    if shutil.which("javac") is None or shutil.which("jar") is None:
        pytest.skip("needs the JDK's javac and jar (scripts/setup installs them)")
    d = tmp_path_factory.mktemp("hello")
    (d / "Hello.java").write_text(
        'public class Hello { public static void main(String[] a) { System.out.println("hi"); } }'
    )
    subprocess.run(["javac", "-d", str(d), str(d / "Hello.java")], check=True)
    subprocess.run(["jar", "cf", str(d / "a.jar"), "-C", str(d), "Hello.class"], check=True)
    shutil.copy(d / "a.jar", d / "b.jar")
    return d / "a.jar", d / "b.jar"


def _java(options: str, class_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["java", *options.split(), "-Xlog:class+load=info", "-cp", str(class_path), "Hello"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_real_jvm_maps_a_matching_archive_and_starts_without_one_that_does_not(
    hello_jars: tuple[Path, Path], tmp_path: Path
) -> None:
    a, b = hello_jars
    archive = tmp_path / "hello.jsa"
    subprocess.run(["java", f"-XX:ArchiveClassesAtExit={archive}", "-cp", str(a), "Hello"], check=True, timeout=60)
    mapped = _java(class_archive.java_options(archive), a)
    assert mapped.returncode == 0 and "hi" in mapped.stdout
    assert "Hello source: shared objects file (top)" in mapped.stdout
    # another class path: the JVM starts and loads the class from its jar (Java says so in one warning line)
    other = _java(class_archive.java_options(archive), b)
    assert other.returncode == 0 and "hi" in other.stdout
    assert f"Hello source: file:{b}" in other.stdout
    # not an archive at all, or none: the JVM starts as if no archive were given
    broken = tmp_path / "broken.jsa"
    broken.write_bytes(os.urandom(4096))
    for path in (broken, tmp_path / "missing.jsa"):
        run = _java(class_archive.java_options(path), a)
        assert run.returncode == 0 and f"Hello source: file:{a}" in run.stdout
