"""Which source the controller's query reads its topics with, and Spark's own Kafka source's options.

Two sources give the query the same rows (``key``, ``value`` as text, ``topic``, ``partition``, ``offset``,
``timestamp``: :data:`streaming.source.kafka_source.SCHEMA`):

- ``kafka``: Spark's Kafka connector (``spark-sql-kafka-0-10``, ``format("kafka")``): its offsets in the
  Spark UI, ``failOnDataLoss``, ``maxOffsetsPerTrigger``, every Kafka client option as ``kafka.<name>``.
  Its jars must be on the session's class path (``spark.jars`` / ``spark-submit --jars``, or
  ``spark.jars.packages``); ``livectl run`` adds those ``scripts/setup`` put in ``.cache/jvm/spark-kafka``
  (or the ``spark_kafka_jars`` setting's) itself when the run may read with it.
- ``python``: livectl's Python data source (:mod:`streaming.source.kafka_source`, no jar needed).

The ``query_source`` setting chooses: ``auto`` (the default: :data:`AUTO_PREFERS`, the source measured
faster; were that ``kafka``, Spark's source when its jar is there, else ``python``), ``kafka`` or ``python``.
The choice is made once per run (:func:`choose`) and said in one log line. ``docs/spark-kafka-source.md``
says what each gives and what was measured.

A checkpoint is read by the source that can parse its offsets: Spark's Kafka source cannot parse those the
Python source writes (they carry record marks for its data-loss check, :data:`streaming.source.options.MARKS`),
while the Python source reads Spark's. So ``auto`` on a checkpoint the Python source wrote stays ``python``;
``kafka`` is refused there (move with ``resume_from_checkpoint``: :mod:`streaming.driver.rebucket`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from streaming.errors import StreamingError
from streaming.source.options import MARKS

#: the values of the ``query_source`` setting
CHOICES = ("auto", "kafka", "python")

#: what ``auto`` takes: the source measured faster here (docs/spark-kafka-source.md, "Measured side by side":
#: the Python source, in admin latency and in a 100k-partition broker failure); ``kafka`` is then asked for
AUTO_PREFERS = "python"

#: the connector's Maven artifact (``org.apache.spark:spark-sql-kafka-0-10_2.13``), as named in jar files
CONNECTOR_ARTIFACT = "spark-sql-kafka-0-10"

#: where ``scripts/setup`` copies the connector and its dependencies (jvm/spark-kafka/pom.xml)
CACHE_DIR = Path(".cache") / "jvm" / "spark-kafka"


class SourceChoiceError(StreamingError):
    """The ``query_source`` asked for cannot run; the message names the setting and what to do."""


@dataclass(frozen=True)
class Choice:
    """The source a run reads with (``kafka`` or ``python``) and why, for its one log line."""

    source: str
    reason: str

    def line(self) -> str:
        name = "Spark's Kafka source (format kafka)" if self.source == "kafka" else "livectl's Python Kafka source"
        return f"query source: {name}: {self.reason}"


def default_search() -> list[Path]:
    """Where the connector's jars are looked for when ``spark_kafka_jars`` is empty: ``.cache/jvm/spark-kafka``
    in the working directory, then in the checkout this package runs from (an editable install)."""
    return [Path.cwd() / CACHE_DIR, Path(__file__).resolve().parents[1] / CACHE_DIR]


def connector_jars(setting: str, search: Iterable[Path] | None = None) -> list[str]:
    """The connector's jars with its dependencies, as paths for ``spark.jars``: ``setting`` (``spark_kafka_jars``)
    names a folder of jars or lists jar files (comma-separated); empty, the first folder of ``search``
    (:func:`default_search`) that holds the connector. ``[]`` when none is found; a ``setting`` naming a
    path that does not exist, or a folder without the connector, is an error naming the setting."""
    if setting.strip():
        items = [Path(p.strip()) for p in setting.split(",") if p.strip()]
        if len(items) == 1 and items[0].is_dir():
            jars = _jars_in(items[0])
            if not jars:
                raise SourceChoiceError(f"setting 'spark_kafka_jars': {items[0]} holds no {CONNECTOR_ARTIFACT} jar")
            return jars
        missing = [str(p) for p in items if not p.is_file()]
        if missing:
            raise SourceChoiceError(f"setting 'spark_kafka_jars': no such jar file: {', '.join(missing)}")
        return [str(p.resolve()) for p in items]
    for folder in default_search() if search is None else search:
        jars = _jars_in(folder)
        if jars:
            return jars
    return []


def _jars_in(folder: Path) -> list[str]:
    jars = sorted(folder.glob("*.jar")) if folder.is_dir() else []
    return [str(j.resolve()) for j in jars] if any(CONNECTOR_ARTIFACT in j.name for j in jars) else []


def connector_configured(conf: Mapping[str, str]) -> str | None:
    """Where the session's Spark properties put the connector on the class path (``spark.jars`` or
    ``spark.jars.packages``), or ``None``."""
    for key in ("spark.jars", "spark.jars.packages"):
        for item in (conf.get(key) or "").split(","):
            if CONNECTOR_ARTIFACT in item:
                return f"{key} has {item.strip()}"
    return None


def python_checkpoint(last_offsets: str | None) -> bool:
    """Whether the checkpoint's last offset log entry (``offsets/<id>``, ``None`` for a new checkpoint) was
    written by the Python source: its offsets carry marks, which Spark's Kafka source cannot parse."""
    if last_offsets is None:
        return False
    lines = last_offsets.splitlines()
    try:
        offsets = json.loads(lines[-1])
    except (ValueError, IndexError):
        return False
    return isinstance(offsets, dict) and MARKS in offsets


def choose(
    setting: str, conf: Mapping[str, str], last_offsets: str | None = None, prefers: str = AUTO_PREFERS
) -> Choice:
    """The source of this run: ``setting`` (``query_source``), the session's Spark properties ``conf`` and
    the checkpoint's last offset log entry (:func:`python_checkpoint`); ``auto`` takes ``prefers`` where it
    can run. ``kafka`` that cannot run is an error naming the setting; ``auto`` says why it took what it took."""
    if setting not in CHOICES:
        raise SourceChoiceError(f"setting 'query_source': must be one of {', '.join(CHOICES)}, got {setting!r}")
    if setting == "python":
        return Choice("python", "query_source=python")
    where = connector_configured(conf)
    written = python_checkpoint(last_offsets)
    if setting == "kafka":
        if where is None:
            raise SourceChoiceError(
                f"setting 'query_source': kafka needs Spark's Kafka connector ({CONNECTOR_ARTIFACT}) on the class "
                "path: run scripts/setup (livectl run adds .cache/jvm/spark-kafka), set spark_kafka_jars, or pass "
                "spark-submit --jars / --packages (docs/spark-kafka-source.md)"
            )
        if written:
            raise SourceChoiceError(
                "setting 'query_source': kafka cannot read this checkpoint: the Python source wrote its offsets "
                "(with record marks Spark's Kafka source cannot parse); use query_source=auto or python, or move "
                "to a new checkpoint_dir with resume_from_checkpoint"
            )
        return Choice("kafka", f"query_source=kafka, {where}")
    if prefers == "python":
        return Choice(
            "python",
            "query_source=auto takes the source measured faster (docs/spark-kafka-source.md); "
            "query_source=kafka for Spark's",
        )
    if where is None:
        return Choice("python", f"query_source=auto, no {CONNECTOR_ARTIFACT} jar on spark.jars / spark.jars.packages")
    if written:
        return Choice("python", "query_source=auto, the checkpoint's offsets were written by the Python source")
    return Choice("kafka", f"query_source=auto, {where}")


def without_marks(offsets: str) -> str:
    """Starting offsets as Spark's Kafka source takes them: ``earliest``/``latest`` as they are, a JSON object
    of offsets without the Python source's marks."""
    if not offsets.lstrip().startswith("{"):
        return offsets
    raw = json.loads(offsets)
    return json.dumps(
        {t: parts for t, parts in raw.items() if not t.startswith("@")}, sort_keys=True, separators=(",", ":")
    )


#: Kafka client security properties (:class:`sinks.security.KafkaSecurity`) that the Java client takes as they are
JAVA_PROPERTIES = frozenset(
    {
        "security.protocol",
        "sasl.mechanism",
        "sasl.jaas.config",
        "sasl.kerberos.service.name",
        "ssl.truststore.location",
        "ssl.truststore.type",
        "ssl.keystore.location",
        "ssl.keystore.type",
        "ssl.key.password",
        "ssl.endpoint.identification.algorithm",
        "ssl.cipher.suites",
    }
)

_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def java_security(props: Mapping[str, str]) -> dict[str, str]:
    """livectl's Kafka client security properties as the Java client's (Spark's Kafka source takes them as
    ``kafka.<name>``): Java's names as they are; ``sasl.username`` / ``sasl.password`` (librdkafka's names)
    as the ``sasl.jaas.config`` of the mechanism; ``ssl.ca.location`` as the trust store. The trust store and
    key store are PEM files (livectl's own clients read no other kind: :mod:`sinks.security`), so Java is told
    so when the properties do not say it (its default is JKS). A property the Java client has no counterpart
    for is an error naming it."""
    out: dict[str, str] = {}
    for name, value in props.items():
        if name in JAVA_PROPERTIES:
            out[name] = value
        elif name == "ssl.ca.location":
            out["ssl.truststore.location"] = value
        elif name not in ("sasl.username", "sasl.password"):
            raise SourceChoiceError(
                f"Kafka client property {name!r}: Spark's Kafka source (Java client) has no counterpart; use "
                "query_source=python or Java's property (docs/spark-kafka-source.md)"
            )
    for store in ("ssl.truststore", "ssl.keystore"):
        if f"{store}.location" in out:
            out.setdefault(f"{store}.type", "PEM")
    if "sasl.username" in props and "sasl.jaas.config" not in props:
        mechanism = props.get("sasl.mechanism", "PLAIN")
        module = _LOGIN_MODULES.get(mechanism)
        if module is None:
            raise SourceChoiceError(f"Kafka client property 'sasl.mechanism': no login module for {mechanism!r}")
        user = props["sasl.username"].replace("\\", "\\\\").replace('"', '\\"')
        password = props.get("sasl.password", "").replace("\\", "\\\\").replace('"', '\\"')
        out["sasl.jaas.config"] = f'{module} required username="{user}" password="{password}";'
    return out
