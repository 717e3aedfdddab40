"""Who may make the admin calls the channel answers itself: Kafka 3.9's ``AclAuthorizer``, from the ACLs Kafka keeps
in ZooKeeper.

A ZooKeeper-mode Kafka cluster authorizes its clients with ``authorizer.class.name`` set to
``kafka.security.authorizer.AclAuthorizer``; the ACLs (written by ``kafka-acls --authorizer-properties
zookeeper.connect=...`` or an Admin client's CreateAcls) live in ZooKeeper, where every broker reads them:

* ``/kafka-acl/<ResourceType>/<name>`` for a LITERAL pattern (``*`` as the name: every resource of the type);
* ``/kafka-acl-extended/prefixed/<ResourceType>/<prefix>`` for a PREFIXED one;
* each holds ``{"version": 1, "acls": [{"principal": .., "permissionType": .., "operation": .., "host": ..}]}``,
  the names as Kafka writes them (``Topic``, ``Cluster``; ``Allow``, ``Deny``; ``Create``, ``DescribeConfigs``),
  read in any case as Kafka reads them.

:class:`AclAuthorizer` decides one action as Kafka's does (``AclAuthorizer.authorizeAction``): a principal of
``super.users`` may do anything; else the ACLs of the resource's literal name, of the type's ``*`` and of every
prefix pattern the name starts with are the ones that count. None of them: allowed only when
``allow.everyone.if.no.acl.found`` is true (default false). Otherwise allowed when no DENY ACL matches the
operation and an ALLOW ACL matches it or an operation that implies it (DESCRIBE is implied by READ, WRITE,
DELETE and ALTER, DESCRIBE_CONFIGS by ALTER_CONFIGS; ALL matches every operation, in an ALLOW as in a DENY). An
ACL matches a principal when it names it or ``User:*``, and a host when it names the client's IP address or
``*``.

How fresh: the channel reads the ACLs it needs from ZooKeeper for each admin request (:class:`ZkAcls`, the same
znode read once within a request), where a broker keeps all of them in memory and follows Kafka's change
notifications (``/kafka-acl-changes``). Admin calls come at a person's pace and read a handful of znodes, so the
reads cost little, a change applies from the next request on (a broker applies it once its notification is
processed), and there is no cache to keep right across ZooKeeper sessions. A read that fails refuses the action
(logged).
"""

from __future__ import annotations

import ipaddress
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, TypeVar

from channel.authz import SUPER_USERS, parse_super_users
from sinks.security import SecurityConfigError

__all__ = [
    "ACL_AUTHORIZER",
    "ALLOW_EVERYONE",
    "AUTHORIZER_CLASS",
    "AUTHORIZER_PROPERTIES",
    "CLUSTER_NAME",
    "TOPIC_AUTHORIZATION_FAILED",
    "WILDCARD",
    "WILDCARD_PRINCIPAL",
    "AclAuthorizer",
    "AclEntry",
    "Check",
    "Operation",
    "Permission",
    "Resource",
    "ZkAcls",
    "allow_all",
    "kafka_host",
    "parse_acls",
]

log = logging.getLogger("livectl.channel.acls")

#: the property naming the authorizer, and the one class the channel follows
AUTHORIZER_CLASS = "authorizer.class.name"
ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
#: whether a resource without any ACL is open to everyone (Kafka's default: false)
ALLOW_EVERYONE = "allow.everyone.if.no.acl.found"
#: Kafka's error code of a topic its principal may not touch (the cluster's:
#: :data:`channel.authz.CLUSTER_AUTHORIZATION_FAILED`)
TOPIC_AUTHORIZATION_FAILED = 29
#: the properties of ``--security-config`` the authorizer takes (with ``super.users``)
AUTHORIZER_PROPERTIES = (AUTHORIZER_CLASS, ALLOW_EVERYONE)
#: the name of Kafka's one ``Cluster`` resource
CLUSTER_NAME = "kafka-cluster"
#: the resource name, host and principal that stand for any
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
#: where LITERAL and PREFIXED ACLs are kept
LITERAL_PATH = "/kafka-acl"
PREFIXED_PATH = "/kafka-acl-extended/prefixed"


class Resource(Enum):
    """The resource types the channel authorizes, as Kafka names their znodes."""

    TOPIC = "Topic"
    CLUSTER = "Cluster"


class Operation(Enum):
    """Kafka's ``AclOperation``s, as Kafka names them in ZooKeeper."""

    ALL = "All"
    READ = "Read"
    WRITE = "Write"
    CREATE = "Create"
    DELETE = "Delete"
    ALTER = "Alter"
    DESCRIBE = "Describe"
    CLUSTER_ACTION = "ClusterAction"
    DESCRIBE_CONFIGS = "DescribeConfigs"
    ALTER_CONFIGS = "AlterConfigs"
    IDEMPOTENT_WRITE = "IdempotentWrite"
    CREATE_TOKENS = "CreateTokens"
    DESCRIBE_TOKENS = "DescribeTokens"
    #: a name Kafka does not know (it reads it as ``UNKNOWN``, which matches no request)
    UNKNOWN = "Unknown"


class Permission(Enum):
    ALLOW = "Allow"
    DENY = "Deny"
    UNKNOWN = "Unknown"


#: the operations an ALLOW of which also allows the key (each allows itself too)
_IMPLIED_BY: Mapping[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset(
        {Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}
    ),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS}),
}


_E = TypeVar("_E", Operation, Permission)


def _by_name(kind: type[_E], name: str, unknown: _E) -> _E:
    """Kafka's ``SecurityUtils`` lookup: the name as written (``DescribeConfigs``) or in upper case
    (``DESCRIBECONFIGS``, also ``describeconfigs``); anything else is ``unknown``."""
    for member in kind:
        if name.upper() == member.value.upper():
            return member
    return unknown


@dataclass(frozen=True)
class AclEntry:
    """One ACL of a resource pattern."""

    principal: str
    permission: Permission
    operation: Operation
    host: str = WILDCARD

    def matches(self, permission: Permission, operation: Operation, principal: str, host: str) -> bool:
        """Kafka's ``matchingAclExists`` for one entry."""
        return (
            self.permission is permission
            and self.principal in (principal, WILDCARD_PRINCIPAL)
            and self.operation in (operation, Operation.ALL)
            and self.host in (host, WILDCARD)
        )


def parse_acls(data: bytes | None) -> frozenset[AclEntry]:
    """The ACLs of one znode (Kafka's ``AclEntry.fromBytes``): none for an empty one; ``ValueError`` when it is
    not version 1 JSON of that shape or a principal is not ``Type:name``."""
    if not data:
        return frozenset()
    try:
        doc = json.loads(data)
    except ValueError as e:
        raise ValueError(f"not JSON: {e}") from None
    if doc is None:
        return frozenset()
    if not isinstance(doc, dict) or doc.get("version") != 1 or not isinstance(doc.get("acls"), list):
        raise ValueError('expected {"version": 1, "acls": [...]}')
    out: set[AclEntry] = set()
    for item in doc["acls"]:
        if not isinstance(item, dict):
            raise ValueError(f"an ACL that is not an object: {item!r}")
        try:
            principal, permission, operation, host = (
                str(item[k]) for k in ("principal", "permissionType", "operation", "host")
            )
        except KeyError as e:
            raise ValueError(f"an ACL without {e}") from None
        _, sep, _ = principal.partition(":")
        if not sep:
            raise ValueError(f"expected a principal as Type:name, got {principal!r}")
        out.add(
            AclEntry(
                principal,
                _by_name(Permission, permission, Permission.UNKNOWN),
                _by_name(Operation, operation, Operation.UNKNOWN),
                host,
            )
        )
    return frozenset(out)


#: whether a request may do an operation on a resource (type, name)
Check = Callable[[Operation, Resource, str], bool]


class ZkAcls:
    """The ACLs in ZooKeeper (``zk``: a started :class:`kazoo.client.KazooClient` of the cluster's chroot), read
    when asked and kept for the life of this object (one request)."""

    def __init__(self, zk: Any) -> None:
        self._zk = zk
        self._read: dict[tuple[bool, Resource, str], frozenset[AclEntry]] = {}
        self._prefixes: dict[Resource, tuple[str, ...]] = {}

    def acls(self, prefixed: bool, resource: Resource, name: str) -> frozenset[AclEntry]:
        from kazoo.exceptions import NoNodeError

        key = (prefixed, resource, name)
        if key not in self._read:
            path = f"{PREFIXED_PATH if prefixed else LITERAL_PATH}/{resource.value}/{name}"
            try:
                data, _ = self._zk.get(path)
            except NoNodeError:
                data = None
            try:
                self._read[key] = parse_acls(data)
            except ValueError as e:
                raise ValueError(f"{path}: {e}") from None
        return self._read[key]

    def prefixes(self, resource: Resource) -> tuple[str, ...]:
        from kazoo.exceptions import NoNodeError

        if resource not in self._prefixes:
            try:
                self._prefixes[resource] = tuple(self._zk.get_children(f"{PREFIXED_PATH}/{resource.value}"))
            except NoNodeError:
                self._prefixes[resource] = ()
        return self._prefixes[resource]


@dataclass(frozen=True)
class AclAuthorizer:
    """Kafka's ``AclAuthorizer`` as ``--security-config`` configures it (:meth:`from_properties`): its
    ``super.users`` and ``allow.everyone.if.no.acl.found``."""

    super_users: frozenset[str] = field(default_factory=frozenset)
    allow_everyone_if_no_acl_found: bool = False

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> AclAuthorizer | None:
        """``None`` without ``authorizer.class.name`` (everyone may do everything, as Kafka); that class: its
        settings; any other class: :class:`SecurityConfigError` naming the property."""
        clean = {k.strip(): v.strip() for k, v in props.items()}
        name = clean.get(AUTHORIZER_CLASS, "")
        if not name:
            return None
        if name != ACL_AUTHORIZER:
            raise SecurityConfigError(
                AUTHORIZER_CLASS, f"the channel authorizes only as {ACL_AUTHORIZER} (ACLs in ZooKeeper), not {name}"
            )
        supers = clean.get(SUPER_USERS, "")
        # Kafka's Boolean.parseBoolean after trim: "true" in any case, anything else false
        allow = clean.get(ALLOW_EVERYONE, "false").lower() == "true"
        return cls(parse_super_users(supers) if supers else frozenset(), allow)

    def authorize(
        self,
        acls: ZkAcls,
        principal: str,
        host: str,
        *,
        operation: Operation,
        resource: Resource,
        name: str,
    ) -> bool:
        """Whether ``principal`` connected from ``host`` (an IP address) may do ``operation`` on the resource
        (Kafka's ``authorizeAction``); ``acls`` reads the ACLs."""
        if principal in self.super_users:
            return True
        entries = self.matching(acls, resource, name)
        if not entries:
            return self.allow_everyone_if_no_acl_found
        if any(e.matches(Permission.DENY, operation, principal, host) for e in entries):
            return False
        allowing = _IMPLIED_BY.get(operation, frozenset({operation}))
        return any(e.matches(Permission.ALLOW, op, principal, host) for e in entries for op in allowing)

    @staticmethod
    def matching(acls: ZkAcls, resource: Resource, name: str) -> list[AclEntry]:
        """The ACLs that count for the resource: its literal name's, the type's ``*`` and those of every prefix
        its name starts with."""
        out = [*acls.acls(False, resource, name), *acls.acls(False, resource, WILDCARD)]
        for prefix in acls.prefixes(resource):
            if name.startswith(prefix):
                out.extend(acls.acls(True, resource, prefix))
        return out

    def check(self, zk: Any, principal: str, host: str) -> Check:
        """What one request of ``principal`` from ``host`` may do, its ACLs read from ``zk`` (each znode once); a
        read that fails, or ACLs Kafka could not read either, refuse (logged)."""
        acls = ZkAcls(zk)

        def allowed(operation: Operation, resource: Resource, name: str) -> bool:
            from kazoo.exceptions import KazooException
            from kazoo.handlers.threading import KazooTimeoutError

            try:
                granted = self.authorize(acls, principal, host, operation=operation, resource=resource, name=name)
            except (KazooException, KazooTimeoutError, ValueError) as e:
                log.error(
                    "cannot read the ACLs of %s %s in ZooKeeper (%s): %s refused to %s",
                    resource.value,
                    name,
                    e,
                    operation.value,
                    principal,
                )
                return False
            if not granted:
                log.info("%s from %s may not %s %s %s", principal, host, operation.value, resource.value, name)
            return granted

        return allowed

    def describe(self) -> str:
        """For the channel's start line."""
        supers = ";".join(sorted(self.super_users)) or "none"
        return (
            f"admin calls authorized as {ACL_AUTHORIZER} from the ACLs in ZooKeeper (super.users {supers}; "
            f"{ALLOW_EVERYONE}={'true' if self.allow_everyone_if_no_acl_found else 'false'})"
        )


def kafka_host(address: str) -> str:
    """A client's IP address as Kafka's ``AclAuthorizer`` compares it with an ACL's host (Java's
    ``InetAddress.getHostAddress()``): IPv4 as is; IPv6 as eight groups of hex without leading zeros and
    uncompressed (``::1`` is ``0:0:0:0:0:0:0:1``), its zone after ``%``; an IPv4-mapped IPv6 address as its IPv4
    address (Java makes it an ``Inet4Address``). Anything else unchanged."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv4Address):
        return str(ip)
    if ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    groups = ":".join(format(int(g, 16), "x") for g in ip.exploded.split(":"))
    zone = address.partition("%")[2]
    return f"{groups}%{zone}" if zone else groups


def allow_all(operation: Operation, resource: Resource, name: str) -> bool:
    """The :data:`Check` without an authorizer: everything is allowed, as Kafka without ``authorizer.class.name``."""
    return True
