"""The files an operator edits or copies, shipped with livectl: ``conf/`` at the top of the repository, installed
by the wheel as the data-only package ``livectl_conf`` (``pyproject.toml``), so the job finds them from any
working directory, in a checkout (``pip install -e``) and in any install (a wheel, a packed venv):

- ``livectl-defaults.json`` — the settings' defaults (:meth:`streaming.settings.Settings.load`);
- ``spark-defaults.conf`` — Spark properties applied when the user has not set them
  (:func:`streaming.driver.session.spark_session`);
- ``log4j2.properties`` — the driver's log4j2 configuration under ``livectl run``;
- ``expectations/livectl-input.json`` — the great-expectations input suite (:mod:`streaming.query.validation`);
- ``prometheus/prometheus.yml``, ``grafana/`` — monitoring for ``docker-compose.yml`` (Prometheus' scrape
  configuration, the Grafana dashboard ``grafana/dashboards/livectl-controller.json`` and its provisioning);
- ``zoo.cfg.template`` — ZooKeeper's configuration for ``livectl local up``;
- ``jars/livectl-spark.jar`` — the JVM side of the Spark UI's per-batch figures (:mod:`streaming.monitoring.spark_ui`;
  built from ``jvm/livectl-spark/src`` by ``scripts/build-jar``), for ``spark.jars`` / ``spark-submit --jars``.

``livectl conf path [NAME]`` prints where they are, e.g. for ``spark-submit --properties-file``. Users
override them with their own files (``livectl run --config``, ``--properties-file``), never by editing
the installed copies.
"""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

#: the package the wheel installs ``conf/`` as
CONF_PACKAGE = "livectl_conf"

#: names of the shipped files, relative to ``conf/``
DEFAULTS = "livectl-defaults.json"
SPARK_DEFAULTS = "spark-defaults.conf"
LOG4J2 = "log4j2.properties"
INPUT_SUITE = "expectations/livectl-input.json"
PROMETHEUS = "prometheus/prometheus.yml"
GRAFANA_DASHBOARD = "grafana/dashboards/livectl-controller.json"
SPARK_JAR = "jars/livectl-spark.jar"
ZOO_CFG_TEMPLATE = "zoo.cfg.template"
SHIPPED = (DEFAULTS, SPARK_DEFAULTS, LOG4J2, INPUT_SUITE, PROMETHEUS, GRAFANA_DASHBOARD, SPARK_JAR, ZOO_CFG_TEMPLATE)


def conf_root() -> Path:
    """The shipped ``conf/`` folder: where the installed package ``livectl_conf`` is (a wheel's copy, or the
    repository's ``conf/`` under ``pip install -e``), else, in a checkout run without installing it (e.g.
    ``PYTHONPATH=. python -m streaming``), the repository's ``conf/`` beside this package.

    The package is data only (a namespace package), found by its import spec's search locations rather than
    ``importlib.resources.files``: an editable install adds a location that is no folder, which the latter
    refuses on Python 3.11."""
    spec = find_spec(CONF_PACKAGE)
    for location in (spec.submodule_search_locations or []) if spec is not None else []:
        if Path(location).is_dir():
            return Path(location)
    return Path(__file__).resolve().parents[1] / "conf"


def conf_file(name: str) -> Path:
    """The shipped file ``name`` (e.g. ``"expectations/livectl-input.json"``)."""
    return conf_root().joinpath(*name.split("/"))


def conf_path(name: str) -> Path:
    """The shipped file ``name`` as a path on the local disk (for the JVM, which takes file names): the
    files are installed as files (a wheel, ``pip install -e``, a packed venv), so this is :func:`conf_file`."""
    return conf_file(name)
