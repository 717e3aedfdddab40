"""The Kafka ACLs that lock livectl's topics for one deployment (``livectl acls``), as values.

A deployment names the Kafka principals of its three roles (:class:`Deployment`); :func:`acl_set` gives
every ``ALLOW`` rule the broker's authorizer needs for livectl to run, and nothing more — with
``allow.everyone.if.no.acl.found=false``, everything else is refused:

* **controllers** (the active controller and its standbys: one principal, or several) read the input
  topics ``livectl.admin`` and ``livectl.broker-events`` (the query's source); write the output topics
  ``livectl.requests``, ``livectl.admin-results`` and ``livectl.rejected`` in transactions and read their
  tails (a replayed micro-batch is written once); write ``livectl.broker-events`` too — the driver
  publishes there what it learns outside Kafka (the liveness bridge's registrations from ZooKeeper, the
  failover reference that opens a new controller's barrier, partition states re-read after a refused
  write, ZooKeeper admin paths, auto-rebalance ticks); create the five topics when they are missing (at
  start); and use the request sink's ``transactional.id`` (:func:`sinks.requests.transactional_id`).
* **brokers** read ``livectl.requests`` and write ``livectl.broker-events``; the simulated brokers also
  read (and create) their control topic ``livectl.simbrokers.control``; they (and the controller channel,
  for real brokers) write (and create) ``livectl.log-dirs``, the brokers' log sizes, which controllers (the
  status page) and admins (``reassign --verify`` / ``--list``) read.
* **admins** (who run ``livectl topics``, ``reassign``, ``elect-leaders``, ``configs``) write
  ``livectl.admin`` and read ``livectl.admin-results`` (the controller's answers, awaited unless
  ``--no-wait``); with the simulated brokers they also write the control topic and read ``livectl.requests``
  (``livectl-simbrokers shutdown --wait``).

So only a controller writes requests, results and rejections; only brokers and controllers write broker
events; only admins write admin commands. Every client here reads without a consumer group (it assigns
partitions itself), so no group is granted — except, when asked, the groups of Spark's own Kafka source
(``groupIdPrefix``), read on a prefix. Reading or writing a topic implies describing it (Kafka's
authorizer), so no ``Describe`` rule is listed.

A rule set renders as ``kafka-acls.sh`` commands (:func:`kafka_acls_commands`); :mod:`admin.acls_cmd`
prints them or applies them with the Admin API.
"""

from __future__ import annotations

import enum
import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from admin.publish import ADMIN_RESULTS_TOPIC, ADMIN_TOPIC
from core.kafka.envelope import BROKER_EVENTS_TOPIC, REQUESTS_TOPIC
from core.kafka.log_dirs import LOG_DIRS_TOPIC

REJECTED_TOPIC = "livectl.rejected"
#: the simulated brokers' control topic (``simbrokers.control.CONTROL_TOPIC``; admin may not import simbrokers)
SIMBROKERS_CONTROL_TOPIC = "livectl.simbrokers.control"
#: the query name of a controller run with the default settings (``streaming.settings.Settings.query_name``)
DEFAULT_QUERY_NAME = "livectl"
#: Spark's Kafka source's default ``groupIdPrefix``
SPARK_GROUP_PREFIX = "spark-kafka-source"

#: a Kafka principal as the authorizer names it: ``User:<name>`` (what SCRAM users and TLS principals map to)
_PRINCIPAL = re.compile(r"User:\S.*")
#: Kafka's legal topic / transactional id characters
_NAME = re.compile(r"[A-Za-z0-9._-]+")


class AclConfigError(ValueError):
    """A deployment cannot be described: ``field`` names the option, ``reason`` says why."""

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}")


class Operation(enum.Enum):
    """Kafka ACL operations used here; the value is ``kafka-acls.sh``'s ``--operation`` name."""

    READ = "Read"
    WRITE = "Write"
    CREATE = "Create"


class ResourceType(enum.Enum):
    """The value is ``kafka-acls.sh``'s option for the resource."""

    TOPIC = "--topic"
    TRANSACTIONAL_ID = "--transactional-id"
    GROUP = "--group"


class PatternType(enum.Enum):
    """The value is ``kafka-acls.sh``'s ``--resource-pattern-type``."""

    LITERAL = "literal"
    PREFIXED = "prefixed"


class Role(enum.Enum):
    CONTROLLER = "controller"
    BROKER = "broker"
    ADMIN = "admin"


@dataclass(frozen=True)
class Resource:
    type: ResourceType
    name: str
    pattern: PatternType = PatternType.LITERAL


@dataclass(frozen=True)
class Acl:
    """``ALLOW principal operations ON resource`` from any host; ``why`` says which client needs it."""

    role: Role
    principal: str
    resource: Resource
    operations: tuple[Operation, ...]
    why: str


@dataclass(frozen=True)
class Topics:
    """livectl's topic names (the settings' ``admin_topic``, ``broker_events_topic``, … ; defaults)."""

    admin: str = ADMIN_TOPIC
    broker_events: str = BROKER_EVENTS_TOPIC
    requests: str = REQUESTS_TOPIC
    admin_results: str = ADMIN_RESULTS_TOPIC
    rejected: str = REJECTED_TOPIC
    simbrokers_control: str = SIMBROKERS_CONTROL_TOPIC
    log_dirs: str = LOG_DIRS_TOPIC

    def controller_topics(self) -> tuple[str, ...]:
        return (self.admin, self.broker_events, self.requests, self.admin_results, self.rejected)


@dataclass(frozen=True)
class Deployment:
    """The principals of each role and the names their rules are on. ``transactional_id``: the request
    sink's (``livectl-<query_name>``). ``simulated_brokers``: grant the simulated brokers' control topic.
    ``spark_group_prefix``: grant the controllers the consumer groups of Spark's Kafka source (``None``:
    the query reads with livectl's Python source, which uses no group)."""

    controllers: tuple[str, ...]
    brokers: tuple[str, ...]
    admins: tuple[str, ...]
    transactional_id: str
    topics: Topics = Topics()
    simulated_brokers: bool = True
    spark_group_prefix: str | None = None

    def __post_init__(self) -> None:
        roles = {"--controller-principal": self.controllers, "--broker-principal": self.brokers}
        roles["--admin-principal"] = self.admins
        seen: dict[str, str] = {}
        for option, principals in roles.items():
            if not principals:
                raise AclConfigError(option, "at least one principal is needed")
            for p in principals:
                if not _PRINCIPAL.fullmatch(p):
                    raise AclConfigError(option, f"must look like User:NAME (Kafka's principal), got {p!r}")
                if p in seen:
                    where = "twice" if seen[p] == option else f"also in {seen[p]}"
                    # one principal in two roles would hold both roles' rights: the separation is gone
                    raise AclConfigError(option, f"{p} is given {where}; each role needs principals of its own")
                seen[p] = option
        names = {
            "--admin-topic": self.topics.admin,
            "--broker-events-topic": self.topics.broker_events,
            "--requests-topic": self.topics.requests,
            "--admin-results-topic": self.topics.admin_results,
            "--rejected-topic": self.topics.rejected,
            "--control-topic": self.topics.simbrokers_control,
            "--log-dirs-topic": self.topics.log_dirs,
            "--query-name": self.transactional_id,
        }
        if self.spark_group_prefix is not None:
            names["--spark-group-prefix"] = self.spark_group_prefix
        for option, name in names.items():
            if not _NAME.fullmatch(name) or name in (".", ".."):
                raise AclConfigError(option, f"{name!r} is not a Kafka name (letters, digits, '.', '_', '-')")
        topics = [*self.topics.controller_topics(), self.topics.log_dirs]
        if self.simulated_brokers:
            topics.append(self.topics.simbrokers_control)
        if len(set(topics)) != len(topics):
            raise AclConfigError("--*-topic", f"livectl's topics must differ, got {topics}")


def acl_set(d: Deployment) -> tuple[Acl, ...]:
    """Every rule of deployment ``d``, in a stable order: by role, principal, then resource."""
    t = d.topics
    read, write, create = Operation.READ, Operation.WRITE, Operation.CREATE

    def topic(name: str) -> Resource:
        return Resource(ResourceType.TOPIC, name)

    out: list[Acl] = []
    for p in d.controllers:
        c = Role.CONTROLLER
        out += [
            Acl(c, p, topic(t.admin), (read, create), "the query's source reads admin commands; created at start"),
            Acl(
                c,
                p,
                topic(t.broker_events),
                (read, write, create),
                "the source reads broker events; the driver writes what it learns outside Kafka "
                "(ZooKeeper registrations, the failover reference, re-read states, rebalance ticks)",
            ),
        ]
        for name, what in ((t.requests, "requests"), (t.admin_results, "admin results"), (t.rejected, "rejections")):
            why = f"the request sink writes {what} in transactions and reads the tail to replay a batch once"
            out.append(Acl(c, p, topic(name), (read, write, create), why))
        out.append(
            Acl(
                c,
                p,
                Resource(ResourceType.TRANSACTIONAL_ID, d.transactional_id),
                (write,),
                "the request sink's transactions (one id for every controller: a successor fences the rest)",
            )
        )
        out.append(Acl(c, p, topic(t.log_dirs), (read,), "the status page reads the brokers' log sizes"))
        if d.spark_group_prefix is not None:
            group = Resource(ResourceType.GROUP, d.spark_group_prefix, PatternType.PREFIXED)
            out.append(Acl(c, p, group, (read,), "Spark's Kafka source: its consumer groups (groupIdPrefix)"))
    for p in d.brokers:
        b = Role.BROKER
        out += [
            Acl(b, p, topic(t.requests), (read,), "brokers read the controller's requests"),
            Acl(b, p, topic(t.broker_events), (write,), "brokers write AlterPartition, responses, controlled shutdown"),
            Acl(
                b,
                p,
                topic(t.log_dirs),
                (write, create),
                "the simulated brokers and the controller channel publish the brokers' log sizes (DescribeLogDirs) "
                "and create the topic",
            ),
        ]
        if d.simulated_brokers:
            why = "the simulated brokers read their control topic (and create it)"
            out.append(Acl(b, p, topic(t.simbrokers_control), (read, create), why))
    for p in d.admins:
        a = Role.ADMIN
        out += [
            Acl(a, p, topic(t.admin), (write,), "the admin CLI writes commands"),
            Acl(a, p, topic(t.admin_results), (read,), "the admin CLI waits for the answers"),
            Acl(a, p, topic(t.log_dirs), (read,), "reassign --verify/--list read the brokers' log sizes"),
        ]
        if d.simulated_brokers:
            out += [
                Acl(a, p, topic(t.simbrokers_control), (write,), "livectl-simbrokers shutdown/kill/faults"),
                Acl(a, p, topic(t.requests), (read,), "livectl-simbrokers shutdown --wait follows the answer"),
            ]
    return tuple(out)


def writers(acls: Iterable[Acl], topic_name: str) -> frozenset[str]:
    """The principals allowed to write ``topic_name`` by ``acls``."""
    return frozenset(
        a.principal
        for a in acls
        if a.resource.type is ResourceType.TOPIC and a.resource.name == topic_name and Operation.WRITE in a.operations
    )


def kafka_acls_commands(
    acls: Sequence[Acl], bootstrap_server: str, command_config: str | None = None, tool: str = "kafka-acls.sh"
) -> list[str]:
    """One ``kafka-acls.sh --add`` command per rule, shell-quoted, each after a ``#`` line saying why."""
    head = [tool, "--bootstrap-server", bootstrap_server]
    if command_config:
        head += ["--command-config", command_config]
    out = []
    for a in acls:
        cmd = [*head, "--add", "--allow-principal", a.principal]
        for op in a.operations:
            cmd += ["--operation", op.value]
        cmd += [a.resource.type.value, a.resource.name]
        if a.resource.pattern is not PatternType.LITERAL:
            cmd += ["--resource-pattern-type", a.resource.pattern.value]
        out += [f"# {a.role.value} {a.principal}: {a.why}", shlex.join(cmd)]
    return out
