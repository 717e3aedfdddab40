"""The JVM side of the Spark UI's figures: the shipped jar is the one its source builds, and its input."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from streaming.monitoring import spark_ui
from streaming.resources import SPARK_JAR, conf_path

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[3]


def test_the_shipped_jar_is_what_scripts_build_jar_makes_of_the_source(tmp_path: Path) -> None:
    assert shutil.which("javac"), "javac (JDK 17) is installed by scripts/setup: default-jdk-headless"
    rebuilt = tmp_path / "livectl-spark.jar"
    subprocess.run([str(REPO / "scripts" / "build-jar"), str(rebuilt)], check=True, capture_output=True, timeout=120)
    shipped = conf_path(SPARK_JAR)
    with zipfile.ZipFile(shipped) as z:
        assert sorted(z.namelist()) == ["livectl/spark/BatchFigures.class"]
    # byte for byte: a source change without scripts/build-jar fails here
    assert rebuilt.read_bytes() == shipped.read_bytes(), "run scripts/build-jar and commit the jar"


def test_the_figures_go_to_the_jvm_one_per_line_summary_order_first() -> None:
    metrics = {
        "GlobalTopicCount": 4,
        "ActiveControllerCount": 1,
        "OfflinePartitionsCount": 2,
        "UnderReplicatedPartitions": 3,
        "ReplicasIneligibleToDeleteCount": 0,
    }
    assert spark_ui.figures_lines(metrics) == (
        "OfflinePartitionsCount\t2\nUnderReplicatedPartitions\t3\nGlobalTopicCount\t4\n"
        "ActiveControllerCount\t1\nReplicasIneligibleToDeleteCount\t0\n"
    )
    assert spark_ui.figures_lines({}) == ""
    with pytest.raises(ValueError, match=r"figure name 'a\\tb': must be letters, digits"):
        spark_ui.figures_lines({"a\tb": 1})
