"""The job's SparkSession: its properties in the order they win, and the Spark UI's address as a user can open it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from streaming.resources import LOG4J2, SPARK_DEFAULTS, SPARK_JAR, conf_file, conf_path
from streaming.settings import Settings


def spark_session(
    settings: Settings,
    master: str | None = None,
    ui: bool = True,
    *,
    worker_python: str | None = None,
    spark_conf: Mapping[str, str] | None = None,
    app_name: str | None = None,
) -> Any:
    """The job's SparkSession.

    Spark properties, the first that sets a key wins: ``spark_conf`` (``livectl run --conf``), what was
    submitted (``spark-submit --conf`` / ``--properties-file``, read from the running JVM), the bucket count
    as ``spark.sql.shuffle.partitions``, then the shipped ``spark-defaults.conf`` (``conf/``). With ``master``,
    the shipped ``livectl-spark.jar`` is added to ``spark.jars`` (:mod:`streaming.monitoring.spark_ui`), and so is
    Spark's Kafka connector (:func:`kafka_connector`) unless ``query_source`` is ``python``; under
    ``spark-submit`` the connector comes with ``--jars`` or ``--packages`` (docs/spark-kafka-source.md).
    ``worker_python`` (the entry point passes the driver's own interpreter unless the user chose one) is
    set as ``spark.pyspark.python``, unless that is set. Without ``master`` the process runs under
    ``spark-submit`` and Spark's master is the submitted one; with it (``livectl run``), the driver's JVM
    is started here and takes the shipped ``log4j2.properties`` unless driver Java options are set."""
    from pyspark import SparkConf
    from pyspark.core.context import SparkContext
    from pyspark.sql import SparkSession

    if master is None:
        # under spark-submit the gateway is up: the SparkConf below then starts from the submitted properties
        SparkContext._ensure_initialized()
    conf = SparkConf()
    for key, value in (spark_conf or {}).items():
        conf.set(key, value)
    if master:
        conf.setMaster(master)
    # app_name: controller id and role (streaming.monitoring.spark_ui.app_name); a name the user gave wins
    conf.setIfMissing("spark.app.name", app_name or f"livectl-{settings.query_name}")
    if settings.num_buckets > 0:
        conf.setIfMissing("spark.sql.shuffle.partitions", str(settings.num_buckets))
    if worker_python:
        conf.setIfMissing("spark.pyspark.python", worker_python)
    if master:
        log4j = conf_path(LOG4J2).as_uri()
        conf.setIfMissing("spark.driver.extraJavaOptions", f"-Dlog4j.configurationFile={log4j}")
        # the Spark UI's per-batch figures (streaming.monitoring.spark_ui): on the driver's class path and the
        # executors'
        jars = [j for j in (conf.get("spark.jars") or "").split(",") if j]
        conf.set("spark.jars", ",".join([*jars, str(conf_path(SPARK_JAR)), *kafka_connector(settings, conf)]))
    for key, value in spark_defaults().items():
        conf.setIfMissing(key, value)
    if not ui:
        conf.set("spark.ui.enabled", "false")
    session = SparkSession.builder.config(conf=conf).getOrCreate()
    # Spark's INFO chatter buries the controller's own log lines (the shipped log4j2.properties has the same)
    session.sparkContext.setLogLevel("WARN")
    return session


def kafka_connector(settings: Settings, conf: Any) -> list[str]:
    """The jars of Spark's Kafka connector to add to ``spark.jars``
    (:func:`streaming.source.query_source.connector_jars`) when the run may read with it (``query_source=kafka``,
    or ``auto`` while it prefers Spark's source), unless the properties already name the connector."""
    from streaming.source.query_source import AUTO_PREFERS, connector_configured, connector_jars

    if settings.query_source == "python" or (settings.query_source == "auto" and AUTO_PREFERS == "python"):
        return []
    given = {key: conf.get(key) or "" for key in ("spark.jars", "spark.jars.packages")}
    if connector_configured(given) is not None:
        return []
    return connector_jars(settings.spark_kafka_jars)


def spark_defaults() -> dict[str, str]:
    """The shipped ``spark-defaults.conf`` as properties (Spark's properties-file form: ``key value``)."""
    out: dict[str, str] = {}
    for raw in conf_file(SPARK_DEFAULTS).read_text().splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition(" ")
            out[key] = value.strip()
    return out


def spark_ui_address(spark: Any, environ: Mapping[str, str] = os.environ) -> str | None:
    """The Spark UI's address as a user can open it, or ``None`` when the UI is off.

    Spark reports ``http://<spark.driver.host>:<port>`` (or ``SPARK_PUBLIC_DNS``), while its UI listens on
    ``SPARK_LOCAL_IP`` when that is set and on every interface otherwise. So: ``SPARK_PUBLIC_DNS`` set —
    Spark's address as it is; ``SPARK_LOCAL_IP`` set to one address — that address, the only one the UI
    answers on (loopback when Spark binds to loopback); else ``spark.driver.host`` (set by the user or
    chosen by Spark), on which the UI answers. ``environ`` is this process's environment, which is the
    driver JVM's: PySpark starts the JVM with it (``livectl run``), or the JVM starts Python with its own
    (``spark-submit``)."""
    url = spark.sparkContext.uiWebUrl
    if not url:
        return None
    port = url.rsplit(":", 1)[1]
    if environ.get("SPARK_PUBLIC_DNS"):
        return str(url)
    local_ip = environ.get("SPARK_LOCAL_IP")
    if local_ip and local_ip not in ("0.0.0.0", "::"):
        host = str(local_ip)
    else:
        host = str(spark.sparkContext.getConf().get("spark.driver.host") or url.split("//", 1)[1].rsplit(":", 1)[0])
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 literal
    return f"http://{host}:{port}"
