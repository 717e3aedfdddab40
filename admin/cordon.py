"""``livectl brokers --cordon N`` / ``--uncordon N``: the cordoned brokers in ZooKeeper (:mod:`core.cordon`).

The set is one znode, ``/livectl/cordoned_brokers``, changed by compare-and-set on its version (two operators
cordoning at once both get their broker in); the active controller's admin-path watcher reads the change and
the buckets place no new replica on those brokers from then on, and a controller that takes over reads the
set with its snapshot. Replicas already on a cordoned broker stay where they are.
"""

from __future__ import annotations

import argparse

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from admin.common import EXIT_OK, OperationFailedError, UsageError, zk_connect
from admin.configs import writer
from admin.zkread import ZkReader
from core.cordon import CORDONED_BROKERS, decode_cordoned, encode_cordoned
from core.errors import FormatError

#: compare-and-set attempts before giving up on a znode that keeps changing under us
ATTEMPTS = 20


def change(zk: KazooClient, broker: int, cordon: bool) -> tuple[tuple[int, ...], bool]:
    """Cordon (or uncordon) ``broker``: the cordoned brokers after, and whether the znode changed."""
    for _ in range(ATTEMPTS):
        try:
            data, stat = zk.get(CORDONED_BROKERS)
            version: int | None = stat.version
        except NoNodeError:
            data, version = b"", None
        try:
            current = set(decode_cordoned(data))
        except FormatError as e:
            raise OperationFailedError(f"{CORDONED_BROKERS} holds something else than livectl wrote: {e}") from None
        wanted = current | {broker} if cordon else current - {broker}
        if wanted == current:
            return tuple(sorted(current)), False
        body = encode_cordoned(wanted).encode()
        try:
            if version is None:
                zk.create(CORDONED_BROKERS, body, makepath=True)
            else:
                zk.set(CORDONED_BROKERS, body, version=version)
        except (NodeExistsError, BadVersionError, NoNodeError):
            continue  # someone else changed it between our read and write: read again
        return tuple(sorted(wanted)), True
    raise OperationFailedError(f"{CORDONED_BROKERS} kept changing: gave up after {ATTEMPTS} attempts")


def cordon_command(args: argparse.Namespace) -> int:
    """``--cordon N`` or ``--uncordon N``."""
    cordon = args.cordon is not None
    option, broker = ("--cordon", args.cordon) if cordon else ("--uncordon", args.uncordon)
    if broker < 0:
        raise UsageError(option, f"must be a broker id (0 or more), got {broker}")
    with writer(zk_connect(args)) as zk:
        after, changed = change(zk, broker, cordon)
        registered = ZkReader(zk).brokers()
    listed = ", ".join(map(str, after)) or "none"
    if cordon:
        what = (
            f"Broker {broker} cordoned: no new replica is placed on it"
            if changed
            else (f"Broker {broker} was already cordoned")
        )
    else:
        what = (
            f"Broker {broker} uncordoned: it takes new replicas again"
            if changed
            else (f"Broker {broker} was not cordoned")
        )
    print(f"{what} (cordoned brokers: {listed}).")
    if cordon and broker not in registered:
        print(f"Note: broker {broker} is not registered under /brokers/ids.")
    return EXIT_OK
