"""The job's SparkSession: its properties in the order they win, and the Spark UI's address as a user can open it."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from streaming.resources import LOG4J2, SPARK_DEFAULTS, SPARK_JAR, conf_file, conf_path
from streaming.runtime import class_archive
from streaming.settings import Settings

log = logging.getLogger(__name__)


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

    With ``master`` (``livectl run``) the driver's JVM is started here, its properties the first that sets a
    key wins: ``spark_conf`` (``livectl run --conf``), the bucket count as ``spark.sql.shuffle.partitions``,
    then the shipped ``spark-defaults.conf`` (``conf/``). The shipped ``livectl-spark.jar`` is added to
    ``spark.jars`` (:mod:`streaming.monitoring.spark_ui`), and so is Spark's Kafka connector
    (:func:`kafka_connector`) unless ``query_source`` is ``python``; ``worker_python`` (the entry point passes
    the driver's own interpreter unless the user chose one) is set as ``spark.pyspark.python`` unless set; the
    JVM takes the shipped ``log4j2.properties`` unless driver Java options are set, and maps the class-data-sharing
    archive of Spark's classes when one was made (setting ``spark_class_archive``, :func:`map_class_archive`).

    Without ``master`` the process runs under ``spark-submit``: :func:`submitted_session`."""
    if master is None:
        return submitted_session(settings, ui, worker_python=worker_python)
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    conf = SparkConf()
    for key, value in (spark_conf or {}).items():
        conf.set(key, value)
    conf.setMaster(master)
    # app_name: controller id and role (streaming.monitoring.spark_ui.app_name); a name the user gave wins
    conf.setIfMissing("spark.app.name", app_name or f"livectl-{settings.query_name}")
    if settings.num_buckets > 0:
        conf.setIfMissing("spark.sql.shuffle.partitions", str(settings.num_buckets))
    if worker_python:
        conf.setIfMissing("spark.pyspark.python", worker_python)
    log4j = conf_path(LOG4J2).as_uri()
    conf.setIfMissing("spark.driver.extraJavaOptions", f"-Dlog4j.configurationFile={log4j}")
    if settings.spark_class_archive:
        map_class_archive(conf)
    else:
        log.info("the driver's JVM starts without a class-data-sharing archive (spark_class_archive=false)")
    # the Spark UI's per-batch figures (streaming.monitoring.spark_ui): on the driver's class path and the executors'
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


def map_class_archive(conf: Any, environ: Mapping[str, str] = os.environ, folder: Path | None = None) -> Path | None:
    """Add the class-data-sharing archive made for this Java and Spark (:mod:`streaming.runtime.class_archive`,
    in ``folder``, default its :func:`~streaming.runtime.class_archive.default_folder`) to
    ``spark.driver.extraJavaOptions``, unless those already choose one; returns it, or None when there is none
    (one log line says how to make it)."""
    extra = conf.get("spark.driver.extraClassPath") or ""
    where = folder if folder is not None else class_archive.default_folder(environ)
    found = class_archive.find(where, class_archive.archive_key(environ, extra))
    if found is None:
        log.info("no class-data-sharing archive for this Java and Spark: `livectl class-archive` makes one, once")
        return None
    options = conf.get("spark.driver.extraJavaOptions") or ""
    conf.set("spark.driver.extraJavaOptions", class_archive.with_archive(options, found))
    log.info("the driver's JVM maps the class-data-sharing archive %s", found)
    return found


def submitted_session(settings: Settings, ui: bool = True, *, worker_python: str | None = None) -> Any:
    """The session of an application run by ``spark-submit``: its properties are what was submitted, Spark's
    own precedence (``--conf``, then ``--properties-file``, then ``spark-defaults.conf``). livectl's shipped
    defaults reach it the Spark way, ``--properties-file "$(livectl conf path spark-defaults.conf)"``
    (docs/cluster.md); the SQL properties among them that were not submitted are set on the session here, as is
    the bucket count, and one warning names the others when they are missing. ``worker_python`` becomes
    ``spark.pyspark.python`` when neither it nor ``PYSPARK_PYTHON`` was given (spark-submit exports the
    property to the driver's environment as ``PYSPARK_PYTHON``)."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    if worker_python and not os.environ.get("PYSPARK_PYTHON"):
        builder = builder.config("spark.pyspark.python", worker_python)
    if not ui:
        builder = builder.config("spark.ui.enabled", "false")
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    submitted = session.sparkContext.getConf()
    if settings.num_buckets > 0 and not submitted.contains("spark.sql.shuffle.partitions"):
        session.conf.set("spark.sql.shuffle.partitions", str(settings.num_buckets))
    to_set, missing = defaults_not_submitted(submitted.contains)
    for key, value in to_set.items():
        session.conf.set(key, value)
    if missing:
        log.warning(
            "spark-submit: %d of livectl's Spark defaults were not submitted (%s): pass "
            '--properties-file "$(livectl conf path spark-defaults.conf)" (docs/cluster.md)',
            len(missing),
            ", ".join(missing[:3]) + (", …" if len(missing) > 3 else ""),
        )
    return session


#: properties spark-submit settles itself (its --name, --driver-memory): never livectl's to supply there
_SUBMIT_SETS = frozenset({"spark.app.name", "spark.driver.memory"})


def defaults_not_submitted(submitted: Callable[[str], bool]) -> tuple[dict[str, str], list[str]]:
    """Of the shipped defaults that ``submitted`` says were not submitted: the session properties
    (``spark.sql.*``) to set now, and the names of the others, which only spark-submit could have given."""
    defaults = spark_defaults()
    unset = [key for key in defaults if not submitted(key)]
    to_set = {key: defaults[key] for key in unset if key.startswith("spark.sql.")}
    missing = sorted(key for key in unset if key not in to_set and key not in _SUBMIT_SETS)
    return to_set, missing


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
