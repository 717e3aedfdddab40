"""Blocks of producer ids for ZooKeeper-mode brokers (their AllocateProducerIds request, IBP 3.0+).

Kafka 3.9's ZooKeeper controller answers AllocateProducerIds itself, without its event loop's state beyond
the sender's registration: it reads ``/latest_producer_id_block``, takes the next block of
:data:`BLOCK_SIZE` ids after the one recorded there (the first is 0 when the znode is absent or empty) and
writes it back with the version it read; a write refused because another writer got there first is retried
from the read (``ZkProducerIdManager.getNewProducerIdBlock``). Brokers on an IBP below 3.0 write the same
znode the same way themselves, so both kinds share one sequence. :func:`allocate_block` does exactly that
with kazoo; the znode keeps Kafka's format (``{"version":1,"broker":..,"block_start":"..","block_end":".."}``,
the bounds as decimal strings).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

__all__ = ["BLOCK_SIZE", "PRODUCER_ID_BLOCK_PATH", "ProducerIdBlock", "ProducerIdsExhaustedError", "allocate_block"]

PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
#: Kafka's ``ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE``
BLOCK_SIZE = 1000
_INT64_MAX = 2**63 - 1


class ProducerIdsExhaustedError(RuntimeError):
    """The next block would pass the largest producer id (Kafka treats it as fatal)."""


@dataclass(frozen=True)
class ProducerIdBlock:
    broker_id: int
    first: int
    size: int

    @property
    def last(self) -> int:
        return self.first + self.size - 1

    def encode(self) -> bytes:
        return json.dumps(
            {"version": 1, "broker": self.broker_id, "block_start": str(self.first), "block_end": str(self.last)}
        ).encode()

    @classmethod
    def decode(cls, data: bytes) -> ProducerIdBlock:
        """The znode's block; ``ValueError`` naming the field when it is not Kafka's format."""
        try:
            o = json.loads(data)
        except (ValueError, UnicodeDecodeError) as e:
            raise ValueError(f"{PRODUCER_ID_BLOCK_PATH}: not JSON: {e}") from None
        if not isinstance(o, dict):
            raise ValueError(f"{PRODUCER_ID_BLOCK_PATH}: expected a JSON object")
        values: dict[str, int] = {}
        for key in ("broker", "block_start", "block_end"):
            v = o.get(key)
            # Kafka writes the bounds as strings and the broker as a number; it reads them the same way
            if isinstance(v, bool) or not isinstance(v, int | str):
                raise ValueError(f"{PRODUCER_ID_BLOCK_PATH}: {key}: expected an integer, got {v!r}")
            try:
                values[key] = int(v)
            except ValueError:
                raise ValueError(f"{PRODUCER_ID_BLOCK_PATH}: {key}: expected an integer, got {v!r}") from None
        first, last = values["block_start"], values["block_end"]
        if not 0 <= first <= last <= _INT64_MAX:
            raise ValueError(f"{PRODUCER_ID_BLOCK_PATH}: block {first}-{last} is not a range of producer ids")
        return cls(values["broker"], first, last - first + 1)

    def next_for(self, broker_id: int) -> ProducerIdBlock:
        if self.last > _INT64_MAX - BLOCK_SIZE:
            raise ProducerIdsExhaustedError(f"the block after {self.first}-{self.last} would pass {_INT64_MAX}")
        return ProducerIdBlock(broker_id, self.last + 1, BLOCK_SIZE)


def allocate_block(zk: KazooClient, broker_id: int) -> ProducerIdBlock:
    """The next block of producer ids for ``broker_id``, recorded in ZooKeeper with a versioned write."""
    while True:
        try:
            data, stat = zk.get(PRODUCER_ID_BLOCK_PATH)
        except NoNodeError:
            data, version = b"", -1
        else:
            version = int(stat.version)
        block = ProducerIdBlock.decode(data).next_for(broker_id) if data else ProducerIdBlock(broker_id, 0, BLOCK_SIZE)
        try:
            if version < 0:
                zk.create(PRODUCER_ID_BLOCK_PATH, block.encode())
            else:
                zk.set(PRODUCER_ID_BLOCK_PATH, block.encode(), version=version)
        except (BadVersionError, NodeExistsError):
            continue  # another writer took a block since the read: read again
        return block
