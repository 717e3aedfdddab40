"""The configuration files shipped inside the ``streaming`` package (``streaming/conf/``).

They travel with every install (a wheel, an sdist, ``pip install -e``, a packed venv), so the job finds
them from any working directory:

- ``livectl-defaults.json`` — the settings' defaults (:meth:`streaming.settings.Settings.load`);
- ``spark-defaults.conf`` — Spark properties applied when the user has not set them
  (:func:`streaming.driver.session.spark_session`);
- ``log4j2.properties`` — the driver's log4j2 configuration under ``livectl run``;
- ``expectations/livectl-input.json`` — the great-expectations input suite (:mod:`streaming.query.validation`);
- ``prometheus/prometheus.yml``, ``grafana/`` — monitoring for ``docker-compose.yml`` (Prometheus' scrape
  configuration, the Grafana dashboard ``grafana/dashboards/livectl-controller.json`` and its provisioning);
- ``jars/livectl-spark.jar`` — the JVM side of the Spark UI's per-batch figures (:mod:`streaming.monitoring.spark_ui`;
  built from ``streaming/jvm/src`` by ``scripts/build-jar``), for ``spark.jars`` / ``spark-submit --jars``.

``livectl conf path [NAME]`` prints where they are, e.g. for ``spark-submit --properties-file``. Users
override them with their own files (``livectl run --config``, ``--properties-file``), never by editing
the installed copies.
"""

from __future__ import annotations

import atexit
from contextlib import ExitStack
from importlib.resources import as_file, files
from importlib.resources.abc import Traversable
from pathlib import Path

#: names of the shipped files, relative to ``streaming/conf/``
DEFAULTS = "livectl-defaults.json"
SPARK_DEFAULTS = "spark-defaults.conf"
LOG4J2 = "log4j2.properties"
INPUT_SUITE = "expectations/livectl-input.json"
PROMETHEUS = "prometheus/prometheus.yml"
GRAFANA_DASHBOARD = "grafana/dashboards/livectl-controller.json"
SPARK_JAR = "jars/livectl-spark.jar"
SHIPPED = (DEFAULTS, SPARK_DEFAULTS, LOG4J2, INPUT_SUITE, PROMETHEUS, GRAFANA_DASHBOARD, SPARK_JAR)

_extracted = ExitStack()
atexit.register(_extracted.close)


def conf_file(name: str) -> Traversable:
    """The shipped file ``name`` (e.g. ``"expectations/livectl-input.json"``), read with ``read_text``."""
    node: Traversable = files("streaming") / "conf"
    for part in name.split("/"):
        node = node / part
    return node


def conf_path(name: str) -> Path:
    """The shipped file ``name`` as a path on the local disk (for the JVM, which takes file names).

    A package installed as files (the usual case) gives its own path; one inside a zip archive is
    extracted once to a temporary file that lives until the process exits."""
    return _extracted.enter_context(as_file(conf_file(name)))
