"""Commands a simulated broker process obeys, published on the control topic ``livectl.simbrokers.control``.

Key: the broker id (decimal text). Value: ``{"version": 1, "command": <name>, ...parameters}``:

=================  ===============================================================================
``slow-follower``  ``fetch_interval_ms`` (int) and/or ``max_records`` (int per fetch and partition)
``stuck-follower`` stop fetching (stays registered and answers requests)
``disk-failure``   every replica offline; storage errors; LogDirFailure reported; lasts until restart
``clear``          remove slow / stuck faults
``produce-rate``   ``rate`` (records/s per led partition)
``shutdown``       controlled shutdown, as on SIGTERM, then deregister
``kill``           vanish at once: close the ZooKeeper session without controlled shutdown
=================  ===============================================================================

``livectl-simbrokers shutdown|kill|fault N ...`` (:mod:`simbrokers.ctl`) publishes these.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from core import jsonform as jf
from core.errors import FormatError
from core.kafka.envelope import parse_broker_keyed

CONTROL_TOPIC = "livectl.simbrokers.control"
CONTROL_VERSION = 1
COMMANDS = ("slow-follower", "stuck-follower", "disk-failure", "clear", "produce-rate", "shutdown", "kill")


@dataclass(frozen=True)
class ControlCommand:
    broker_id: int
    command: str
    fetch_interval_ms: int | None = None
    max_records: int | None = None
    rate: float | None = None

    def to_json(self) -> str:
        body: dict[str, Any] = {"version": CONTROL_VERSION, "command": self.command}
        for name in ("fetch_interval_ms", "max_records", "rate"):
            value = getattr(self, name)
            if value is not None:
                body[name] = value
        return json.dumps(body, separators=(",", ":"), sort_keys=True)


def validate(cmd: ControlCommand) -> ControlCommand:
    if cmd.command not in COMMANDS:
        raise FormatError("command", f"unknown command '{cmd.command}'; known: {', '.join(COMMANDS)}")
    if cmd.command == "slow-follower" and cmd.fetch_interval_ms is None and cmd.max_records is None:
        raise FormatError("fetch_interval_ms", "slow-follower needs fetch_interval_ms and/or max_records")
    if cmd.command == "produce-rate" and (cmd.rate is None or cmd.rate < 0):
        raise FormatError("rate", "produce-rate needs a rate >= 0")
    return cmd


def parse_control(key: bytes | str | None, value: bytes | str) -> ControlCommand:
    """Decode one control message; raises :class:`FormatError` naming the field and the reason."""
    broker_id, o = parse_broker_keyed(key, value)
    jf.version(o, CONTROL_VERSION)
    rate = o.get("rate")
    if rate is not None and (isinstance(rate, bool) or not isinstance(rate, int | float)):
        raise FormatError("rate", f"must be a number, got {type(rate).__name__}")
    return validate(
        ControlCommand(
            broker_id,
            jf.string(o, "command"),
            None if o.get("fetch_interval_ms") is None else jf.integer(o, "fetch_interval_ms", minimum=1),
            None if o.get("max_records") is None else jf.integer(o, "max_records", minimum=1),
            None if rate is None else float(rate),
        )
    )
