"""Settings of the whole controller job, built once at the entry point and passed down.

:class:`Settings` is a frozen dataclass. The entry point builds it with :meth:`Settings.load` from
``livectl-defaults.json`` shipped in the package (``conf/``, a flat JSON object whose keys are
the field names below), the user's ``--config`` file (the same form, any subset of the keys) and the
command line's ``--set key=value`` overrides, applied in order (the last one wins). Nothing below the
entry point reads ``os.environ`` or files for configuration.

Values from ``--set`` are text and are converted to the field's type (``int``, ``float``, ``bool``
accepts ``true/false/1/0/yes/no``, ``str``). An unknown key, a value of the wrong type or a value out of
range raises :class:`SettingsError` naming the key and the reason.

``StreamingError`` (:mod:`streaming.errors`) is the root of every exception raised by ``streaming``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields, replace
from importlib.resources.abc import Traversable
from typing import Any

from core.cluster_config import CONTROLLER_CONFIGS, KAFKA_NAMES, controller_fields, parse_config
from core.controller import ControllerConfig
from core.errors import FormatError
from sinks.compression import COMPRESSIONS
from sinks.security import KafkaSecurity, SecurityConfigError, ZkSecurity, is_secret
from streaming.errors import StreamingError
from streaming.resources import DEFAULTS, conf_file
from streaming.source.query_source import CHOICES as QUERY_SOURCES

#: the shipped defaults, ``conf/livectl-defaults.json`` inside the package
DEFAULTS_PATH: Traversable = conf_file(DEFAULTS)


class SettingsError(StreamingError, ValueError):
    """A setting is unknown, of the wrong type or out of range. ``key`` names it."""

    def __init__(self, key: str, reason: str) -> None:
        self.key = key
        self.reason = reason
        super().__init__(f"setting '{key}': {reason}")


@dataclass(frozen=True)
class Settings:
    """Everything the job needs to know; see ``conf/livectl-defaults.json`` for the shipped defaults."""

    #: ZooKeeper connect string, ``host:port[,host:port…][/chroot]``
    zookeeper_connect: str = "127.0.0.1:2181"
    #: ZooKeeper session timeout; the lease and the liveness bridge use it
    zookeeper_session_timeout_ms: int = 18000
    #: Kafka bootstrap servers, ``host:port[,host:port…]``
    bootstrap_servers: str = "127.0.0.1:9092"
    admin_topic: str = "livectl.admin"
    broker_events_topic: str = "livectl.broker-events"
    requests_topic: str = "livectl.requests"
    admin_results_topic: str = "livectl.admin-results"
    rejected_topic: str = "livectl.rejected"
    #: the brokers' DescribeLogDirs reports (core.kafka.log_dirs), read for the status page's bytes moved; not created
    log_dirs_topic: str = "livectl.log-dirs"
    #: the id this controller writes into ``/controller`` (``brokerid``)
    controller_id: int = 1000
    #: number of state buckets; 0 = ``spark.sql.shuffle.partitions`` when set, else one per executor core
    #: (:func:`streaming.driver.startup.default_buckets`); the job sets shuffle partitions equal to it
    #: (docs/design/decisions.md, decision 1). Fixed for the life of a checkpoint.
    num_buckets: int = 0
    #: Spark's checkpoint and livectl's files beside it: a local path or a URI (file:, hdfs://, s3a://, …;
    #: :mod:`streaming.runtime.checkpoint_fs`)
    checkpoint_dir: str = "checkpoints/livectl"
    #: Spark processing-time trigger, e.g. ``"1 second"``; ``"0 seconds"``: a micro-batch as soon as records
    #: come (the source's read waits for them, :mod:`streaming.source.kafka_source`), the next as soon as one ends
    trigger_interval: str = "0 seconds"
    #: the streaming query's name; also names the ZooKeeper sink's progress znode
    query_name: str = "livectl"
    #: where a query without a checkpoint starts reading its input topics: earliest or latest
    starting_offsets: str = "earliest"
    #: a new checkpoint only: the old checkpoint's URI to move from (another bucket count); the input is
    #: read from where its last committed micro-batch ended (:mod:`streaming.driver.rebucket`); "" = none
    resume_from_checkpoint: str = ""
    #: most input records read per micro-batch (all topics together)
    max_records_per_batch: int = 10000
    #: the query's source (:mod:`streaming.source.query_source`): auto (the one measured faster, livectl's Python
    #: source: docs/spark-kafka-source.md), kafka (Spark's ``format("kafka")``, its connector on the class path) or
    #: python
    query_source: str = "auto"
    #: Spark's Kafka connector for ``livectl run``: a folder of jars or comma-separated jar files added to
    #: ``spark.jars``; "" = ``.cache/jvm/spark-kafka`` (``scripts/setup``) when it is there
    spark_kafka_jars: str = ""
    #: ZooKeeper operations per fenced multi-op (docs/design/decisions.md, decision 4: 100 ≈ 20k writes/s)
    zk_ops_per_transaction: int = 100
    #: how long a micro-batch's writes are retried while ZooKeeper or Kafka is unavailable (a restart)
    #: before the query fails; 0 = not retried
    sink_retry_timeout_ms: int = 60000
    #: how long the replay of the micro-batch a previous controller planned but did not commit may go without
    #: progress (a Spark task of it done, a step of its writes) before the controller stops with one line;
    #: the replay itself may take longer (:func:`streaming.driver.wiring.wait_committed`)
    replay_stall_timeout_ms: int = 300000
    #: how many times in a row ``livectl run`` stands for election again after its query failed because Spark
    #: could not start a Python worker in time (a loaded machine); 0 = exit at the first
    python_worker_start_retries: int = 3
    #: ``livectl run`` maps the class-data-sharing archive of Spark's driver classes into the driver's JVM when
    #: one was made for this Java and Spark (``livectl class-archive``; :mod:`streaming.runtime.class_archive`)
    spark_class_archive: bool = True
    #: compression of the request sink's messages (the requests, admin results and rejected input):
    #: none, gzip, snappy, lz4 or zstd; zstd sends 11-15x faster than gzip
    #: (docs/decisions/2026-11-24-zstd-request-compression.md)
    request_compression: str = "zstd"
    #: input offsets gone from Kafka (a broker restarted without its data, a topic created again): fail
    #: the query with a clear message (true, Spark's ``failOnDataLoss``) or go on from the earliest
    #: offset with a logged warning (false)
    fail_on_data_loss: bool = True
    #: the state-change log (:mod:`streaming.monitoring.audit_log`): every decision appended to a Parquet table
    audit_log: bool = True
    #: the state-change log's folder (a location as for ``checkpoint_dir``); "" = beside the checkpoint,
    #: ``<checkpoint_dir>-audit``
    audit_dir: str = ""
    #: ZooKeeper authentication added to the controller's session: "" (none) or ``digest:USER:PASSWORD``
    zookeeper_auth: str = ""
    #: Kafka's ``zookeeper.set.acl``: znodes livectl creates get Kafka's ACLs (writable only with the
    #: credential of ``zookeeper_auth``; world-readable except Kafka's sensitive paths)
    zookeeper_set_acl: bool = False
    #: a standby also takes ``/controller`` from a ZooKeeper-mode Kafka broker elected while it waits: it wins
    #: every re-election among Kafka's controllers (:mod:`streaming.driver.lease`)
    take_over_from_kafka: bool = False
    #: Kafka client security, by Kafka's property names (``kafka_`` + the name with ``_`` for ``.``),
    #: passed to every Kafka client of the job (source, sinks, producers); "" = unset
    #: Kafka's controller configs, under Kafka's names as well (``--set auto.leader.rebalance.enable=false``)
    #: and with Kafka's defaults; ``/config/brokers/<default>`` and ``/config/brokers/<controller_id>``
    #: override them while the controller runs (:mod:`core.cluster_config`)
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_per_broker_percentage: int = 10
    leader_imbalance_check_interval_seconds: int = 300
    #: livectl's ``leader.imbalance.max.leaders.per.interval``: the most leaders one rebalance pass and one
    #: ``elect-leaders --all`` batch move (Kafka's largest int: no bound, Kafka's behaviour)
    leader_imbalance_max_leaders_per_interval: int = 2147483647
    #: the cluster default; a topic's own ``unclean.leader.election.enable`` wins
    unclean_leader_election_enable: bool = False
    delete_topic_enable: bool = True
    #: the cluster default ``min.insync.replicas`` the under-min-ISR figure uses (a topic's own wins)
    min_insync_replicas: int = 1
    kafka_security_protocol: str = ""
    kafka_sasl_mechanism: str = ""
    kafka_sasl_jaas_config: str = ""
    kafka_sasl_kerberos_service_name: str = ""
    kafka_ssl_truststore_location: str = ""
    #: ``PEM`` or unset: said for Java's clients (Spark's Kafka source), which read PEM files only when told
    kafka_ssl_truststore_type: str = ""
    kafka_ssl_keystore_location: str = ""
    kafka_ssl_keystore_type: str = ""
    kafka_ssl_key_location: str = ""
    kafka_ssl_key_password: str = ""
    kafka_ssl_endpoint_identification_algorithm: str = ""
    #: the driver's Prometheus endpoint and status page (``/metrics``, ``/``); 0 = off
    metrics_port: int = 0
    #: the address it listens on (loopback by default; ``0.0.0.0`` for every interface)
    metrics_bind_address: str = "127.0.0.1"

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            expected = _FIELD_TYPES[f.name]
            if expected is float and isinstance(value, int) and not isinstance(value, bool):
                continue
            if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
                raise SettingsError(f.name, f"must be {expected.__name__}, got {type(value).__name__} {value!r}")
            if isinstance(value, str) and not value.strip() and f.name not in _MAY_BE_EMPTY:
                raise SettingsError(f.name, "must not be empty")
        if self.num_buckets < 0:
            raise SettingsError(
                "num_buckets",
                f"must be at least 0 (0: spark.sql.shuffle.partitions when set, else one per executor core), "
                f"got {self.num_buckets}",
            )
        for name in (
            "zookeeper_session_timeout_ms",
            "max_records_per_batch",
            "zk_ops_per_transaction",
            "replay_stall_timeout_ms",
        ):
            if getattr(self, name) < 1:
                raise SettingsError(name, f"must be at least 1, got {getattr(self, name)}")
        if self.python_worker_start_retries < 0:
            raise SettingsError(
                "python_worker_start_retries", f"must be at least 0, got {self.python_worker_start_retries}"
            )
        if self.sink_retry_timeout_ms < 0:
            raise SettingsError("sink_retry_timeout_ms", f"must be at least 0, got {self.sink_retry_timeout_ms}")
        if self.controller_id < 0:
            raise SettingsError("controller_id", f"must be at least 0, got {self.controller_id}")
        for name, kafka in KAFKA_NAMES.items():
            try:
                parse_config(kafka, str(getattr(self, name)).lower())
            except FormatError as e:
                raise SettingsError(name, e.reason) from None
        if not 0 <= self.metrics_port <= 65535:
            raise SettingsError("metrics_port", f"must be a TCP port 1…65535, or 0 for off, got {self.metrics_port}")
        if self.request_compression not in COMPRESSIONS:
            raise SettingsError(
                "request_compression", f"must be one of {', '.join(COMPRESSIONS)}, got {self.request_compression!r}"
            )
        if self.query_source not in QUERY_SOURCES:
            raise SettingsError("query_source", f"must be one of {', '.join(QUERY_SOURCES)}, got {self.query_source!r}")
        if self.starting_offsets not in ("earliest", "latest"):
            raise SettingsError("starting_offsets", f"must be 'earliest' or 'latest', got {self.starting_offsets!r}")
        try:
            self.zookeeper_security()
        except SecurityConfigError as e:
            raise SettingsError(e.key, e.reason) from None
        try:
            self.kafka_security()
        except SecurityConfigError as e:
            raise SettingsError(_kafka_setting(e.key), e.reason) from None

    # ------------------------------------------------------------------ security

    def zookeeper_security(self) -> ZkSecurity:
        """The ZooKeeper authentication and ACLs of the controller's session."""
        return ZkSecurity.parse(self.zookeeper_auth, self.zookeeper_set_acl)

    def kafka_security(self) -> KafkaSecurity:
        """The Kafka client security properties (Kafka's names) of every Kafka client of the job."""
        props = {
            f.name.removeprefix("kafka_").replace("_", "."): getattr(self, f.name)
            for f in fields(self)
            if f.name.startswith("kafka_")
        }
        return KafkaSecurity.from_properties(props)

    # ------------------------------------------------------------------ controller configs

    def controller_configs(self) -> dict[str, str]:
        """The controller configs of these settings by Kafka's names, as Kafka's text."""
        return {kafka: str(getattr(self, name)).lower() for name, kafka in KAFKA_NAMES.items()}

    def controller_config(self) -> ControllerConfig:
        """What the buckets run with from the controller's failover on (:class:`core.controller.ControllerConfig`)."""
        return ControllerConfig(**{name: getattr(self, name) for name in KAFKA_NAMES})

    def with_controller_configs(self, configs: Iterable[tuple[str, str]]) -> Settings:
        """A copy with the controller configs given by Kafka's names (e.g. the effective dynamic ones)."""
        try:
            changes: dict[str, Any] = dict(controller_fields(configs))
        except FormatError as e:
            raise SettingsError(_setting_name(e.field), e.reason) from None
        return replace(self, **changes)

    # ------------------------------------------------------------------ building

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> Settings:
        """Settings from a JSON-like mapping of field names; missing keys keep the dataclass defaults."""
        values = {_setting_name(k): v for k, v in values.items()}
        unknown = sorted(set(values) - set(_FIELD_TYPES))
        if unknown:
            raise SettingsError(unknown[0], f"unknown setting; known: {', '.join(sorted(_FIELD_TYPES))}")
        return cls(**dict(values))

    @classmethod
    def load(
        cls,
        defaults_path: Traversable | None = DEFAULTS_PATH,
        overrides: Iterable[str] = (),
        config_path: Traversable | None = None,
    ) -> Settings:
        """The defaults file (``None``: the dataclass defaults), then the user's ``config_path`` (a JSON object
        of some of the same keys, ``livectl run --config``), then each ``key=value`` override in order."""
        base: dict[str, Any] = {}
        if defaults_path is not None:
            base.update(_read_json_object("defaults", defaults_path))
        if config_path is not None:
            base.update(_read_json_object("config", config_path))
        settings = cls.from_mapping(base)
        return settings.with_overrides(overrides)

    def with_overrides(self, overrides: Iterable[str]) -> Settings:
        """A copy with ``key=value`` texts applied in order (as given to ``--set``)."""
        changes: dict[str, Any] = {}
        for item in overrides:
            key, sep, text = item.partition("=")
            key = _setting_name(key.strip())
            if not sep:
                raise SettingsError(key or item, f"override {item!r} must look like key=value")
            changes[key] = parse_value(key, text.strip())
        return replace(self, **changes) if changes else self

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __repr__(self) -> str:
        # settings get logged; secrets never are
        shown = {k: ("***" if v and _is_secret(k) else v) for k, v in asdict(self).items()}
        return f"Settings({shown})"


def _setting_name(key: str) -> str:
    """The setting a key names: Kafka's name of a controller config (``delete.topic.enable``) names its field."""
    return CONTROLLER_CONFIGS[key][0] if key in CONTROLLER_CONFIGS else key


def _is_secret(key: str) -> bool:
    return key == "zookeeper_auth" or is_secret(key)


def _kafka_setting(prop: str) -> str:
    """The setting of a Kafka property named in an error (``sasl.mechanism`` -> ``kafka_sasl_mechanism``)."""
    return "kafka_" + prop.replace(".", "_") if "." in prop else prop


def _read_json_object(key: str, path: Traversable) -> dict[str, Any]:
    """A settings file's JSON object; ``key`` names the file in errors (``defaults`` or ``config``)."""
    try:
        raw = json.loads(path.read_text())
    except OSError as e:
        raise SettingsError(key, f"cannot read {path}: {e}") from None
    except ValueError as e:
        raise SettingsError(key, f"{path} is not valid JSON: {e}") from None
    if not isinstance(raw, dict):
        raise SettingsError(key, f"{path} must hold a JSON object")
    return raw


def parse_value(key: str, text: str) -> Any:
    """Convert the text of a ``--set`` override to the type of setting ``key``."""
    expected = _FIELD_TYPES.get(key)
    if expected is None:
        raise SettingsError(key, f"unknown setting; known: {', '.join(sorted(_FIELD_TYPES))}")
    if expected is str:
        return text
    if expected is bool:
        low = text.lower()
        if low in ("true", "1", "yes"):
            return True
        if low in ("false", "0", "no"):
            return False
        raise SettingsError(key, f"must be true or false, got {text!r}")
    try:
        return expected(text)
    except ValueError:
        raise SettingsError(key, f"must be {expected.__name__}, got {text!r}") from None


#: text settings whose empty value means "unset"
_MAY_BE_EMPTY = frozenset(
    {"zookeeper_auth", "audit_dir", "resume_from_checkpoint", "spark_kafka_jars"}
    | {f.name for f in fields(Settings) if f.name.startswith("kafka_")}
)

_FIELD_TYPES: dict[str, type] = {
    f.name: {"str": str, "int": int, "float": float, "bool": bool}[str(f.type)] for f in fields(Settings)
}
