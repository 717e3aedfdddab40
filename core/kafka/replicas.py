"""Kafka's rule for one partition's replica list, the one place livectl states it.

Kafka refuses a replica list that is empty, repeats a broker, or names a negative broker id
(``AdminZkClient.validateReplicaAssignment`` for a topic's assignment, the controller's checks of a
KIP-455 reassignment: "Empty replica list", "Duplicate replica ids", "Invalid broker id"), with
``INVALID_REPLICA_ASSIGNMENT``. livectl applies the same rule to a created topic's assignment, a
reassignment's target replicas and the assignment read back from ``/brokers/topics/<t>``.
"""

from __future__ import annotations

from typing import Any

from core import jsonform as jf
from core import limits as lim
from core.errors import FormatError
from core.kafka.error_codes import KafkaError

__all__ = ["read_replica_list"]


def read_replica_list(v: Any, name: str, *, what: str, hint: str = "") -> tuple[int, ...]:
    """``v`` as a replica list in assignment order: at least one and at most
    :data:`core.limits.MAX_REPLICATION_FACTOR` distinct broker ids from 0 to
    :data:`core.limits.MAX_BROKER_ID`.

    ``name`` is the field (as the caller's input spells it), ``what`` the partition the list belongs to
    (``"partition orders-3"``), ``hint`` a parenthesised remark added to the empty-list reason. Raises
    :class:`core.errors.FormatError` naming ``name`` (or the offending entry ``name[i]``) with Kafka's
    ``INVALID_REPLICA_ASSIGNMENT``.
    """
    error = KafkaError.INVALID_REPLICA_ASSIGNMENT.name
    try:
        replicas = jf.int_seq(
            v,
            name,
            minimum=0,
            maximum=lim.MAX_BROKER_ID,
            distinct=True,
            what=what,
            max_items=lim.MAX_REPLICATION_FACTOR,
        )
    except FormatError as e:
        raise FormatError(e.field, e.reason, error) from None
    if not replicas:
        raise FormatError(name, f"{what} must list at least one broker" + (f" ({hint})" if hint else ""), error)
    return replicas
