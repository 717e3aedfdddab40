"""``livectl brokers list`` and ``livectl controller status``: who is registered and who controls, from ZooKeeper."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime

from admin.common import EXIT_FAILED, EXIT_OK, OperationFailedError, UsageError, run_command, waits, zk_connect
from admin.zkread import connect
from core.errors import FormatError

#: the exit codes, as ``livectl brokers --help`` lists them
EXIT_CODES_BROKERS = (
    "Exit codes: 0 done (--drain: broker N holds no replica and leads nothing); 1 refused or failed, the reason "
    "in one line (a controller's refusal, a drain cancelled, a partition no broker can take); 2 invalid input "
    "(option and reason named; --no-wait is refused: there is nothing here to fire and forget); 3 --drain not "
    "done within --timeout (the moves it started go on: --drain N again resumes it); 4 ZooKeeper or Kafka "
    "unreachable."
)
#: why ``brokers --cordon/--uncordon/--drain/--cancel-drain`` refuse ``--no-wait``
NO_WAIT_BROKERS = (
    "can't be used with --cordon, --uncordon, --drain or --cancel-drain: a cordon is this tool's own ZooKeeper "
    "write, and a drain's rounds run in this tool (stop it any time; --drain N again resumes it)"
)


def add_brokers_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
    write: argparse.ArgumentParser | None = None,
) -> None:
    """``common``: the read options (``brokers list``); ``write``: the options of commands the controller
    answers (``--drain``), given to ``brokers`` itself (``common`` when not given)."""
    p = sub.add_parser(
        "brokers",
        parents=[write if write is not None else common],
        help="list registered brokers; cordon, drain or uncordon one",
        description="Brokers registered in ZooKeeper. --cordon N: no new replica is placed on broker N (topic "
        "creation, partition addition and reassign --generate skip it; its replicas stay); --uncordon N ends it. "
        "The set is kept in ZooKeeper at /livectl/cordoned_brokers. --drain N cordons N and moves every replica "
        "off it, leaders first, --batch-size partitions at a time under --throttle, until N holds nothing or "
        "--timeout seconds passed; the drain is recorded at /livectl/drains/N, so --drain N again resumes it and "
        "--cancel-drain N stops it.",
        epilog=EXIT_CODES_BROKERS,
    )
    action = p.add_mutually_exclusive_group()
    action.add_argument("--cordon", type=int, metavar="N", help="place no new replica on broker N")
    action.add_argument("--uncordon", type=int, metavar="N", help="let broker N take new replicas again")
    action.add_argument(
        "--drain",
        type=int,
        metavar="N",
        help="cordon broker N and move every replica off it, leaders first (resumable: run it again)",
    )
    action.add_argument("--cancel-drain", type=int, metavar="N", help="stop draining broker N (it stays cordoned)")
    p.add_argument("--batch-size", type=int, default=None, help="--drain: partitions moving at once (default 10)")
    p.add_argument("--throttle", type=int, default=None, help="--drain: replication throttle, bytes/s (default none)")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="--drain: print the first round's plan from the live state and the controller's dry run of its first "
        "command; cordon nothing, record nothing, move nothing",
    )
    p.set_defaults(func=cmd_brokers_cordon)
    bsub = p.add_subparsers(dest="brokers_cmd", required=False, metavar="COMMAND")
    lp = bsub.add_parser("list", parents=[common], help="list /brokers/ids", description="List /brokers/ids.")
    lp.add_argument("--json", action="store_true", help="print JSON (same as --output json)")
    lp.add_argument("--output", choices=["text", "json"], default="text", help="text or json")
    lp.add_argument(
        "--min",
        type=int,
        default=None,
        metavar="N",
        help="exit 1 when fewer than N brokers are registered (a healthcheck that can fail)",
    )
    lp.set_defaults(func=cmd_brokers_list)


def add_controller_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    p = sub.add_parser("controller", help="the active controller", description="The active controller.")
    csub = p.add_subparsers(dest="controller_cmd", required=True, metavar="COMMAND")
    sp = csub.add_parser(
        "status", parents=[common], help="show /controller and /controller_epoch", description="Controller status."
    )
    sp.add_argument("--json", action="store_true", help="print JSON (same as --output json)")
    sp.add_argument("--output", choices=["text", "json"], default="text", help="text or json")
    sp.set_defaults(func=cmd_controller_status)


def cmd_brokers_cordon(args: argparse.Namespace) -> int:
    return run_command(args, _brokers_cordon)


def _brokers_cordon(args: argparse.Namespace) -> int:
    from admin.cordon import cordon_command

    if not waits(args):
        raise UsageError("--no-wait", NO_WAIT_BROKERS)
    if getattr(args, "drain", None) is not None or getattr(args, "cancel_drain", None) is not None:
        from admin.drain import cancel_command, drain_command

        if args.dry_run and args.drain is None:
            raise UsageError("--dry-run", "is for --drain only")
        return drain_command(args) if args.drain is not None else cancel_command(args)
    if args.cordon is None and args.uncordon is None:
        raise UsageError("brokers", "give a command (list), or --cordon N, --uncordon N, --drain N or --cancel-drain N")
    if getattr(args, "dry_run", False):
        raise UsageError("--dry-run", "is for --drain only")
    return cordon_command(args)


def cmd_brokers_list(args: argparse.Namespace) -> int:
    return run_command(args, _brokers_list)


def _brokers_list(args: argparse.Namespace) -> int:
    """Print the registrations; with ``--min N`` the exit code is 1 when fewer than N are registered (the
    listing is printed either way, so a failing healthcheck still shows who is there)."""
    minimum: int | None = args.min
    if minimum is not None and minimum < 0:
        raise UsageError("--min", f"must be 0 or more, got {minimum}")
    if getattr(args, "cordon", None) is not None or getattr(args, "uncordon", None) is not None:
        raise UsageError("--cordon", "is not for brokers list: livectl brokers --cordon N")
    with connect(zk_connect(args)) as zk:
        brokers = zk.brokers()
        controller = zk.controller().broker_id
        try:
            cordoned = set(zk.cordoned())
        except FormatError as e:
            raise OperationFailedError(f"/livectl/cordoned_brokers is not livectl's JSON: {e}") from None
        draining = zk.draining()
    if args.json or args.output == "json":
        listing = {
            str(b): r.raw | {"broker_epoch": r.epoch, "cordoned": b in cordoned, "draining": b in draining}
            for b, r in sorted(brokers.items())
        }
        print(json.dumps(listing, indent=2))
    elif not brokers:
        print("no brokers registered under /brokers/ids")
    else:
        print(f"{'ID':>4}  {'EPOCH':>12}  {'RACK':<8}  ENDPOINTS")
        for b, r in sorted(brokers.items()):
            mark = "  (controller)" if b == controller else ""
            mark += "  (draining)" if b in draining else "  (cordoned)" if b in cordoned else ""
            print(f"{b:>4}  {r.epoch:>12}  {r.rack or '-':<8}  {','.join(r.endpoints)}{mark}")
    away = sorted(cordoned - set(brokers))
    if away and not (args.json or args.output == "json"):
        print(f"cordoned, not registered: {', '.join(map(str, away))}")
    if minimum is not None and len(brokers) < minimum:
        raise OperationFailedError(
            f"{len(brokers)} broker(s) registered under /brokers/ids, fewer than --min {minimum}"
        )
    return EXIT_OK


def cmd_controller_status(args: argparse.Namespace) -> int:
    return run_command(args, _controller_status)


def iso_utc(epoch_ms: str | None) -> str | None:
    """``/controller``'s ``timestamp`` (epoch milliseconds, as Kafka writes it) as ISO-8601 UTC with
    milliseconds (``2023-11-14T22:13:20.000Z``); ``None`` when absent or not a number."""
    try:
        ms = int(epoch_ms) if epoch_ms is not None else None
    except ValueError:
        return None
    if ms is None:
        return None
    try:
        moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _controller_status(args: argparse.Namespace) -> int:
    with connect(zk_connect(args)) as zk:
        info = zk.controller()
    elected_at = iso_utc(info.timestamp)
    if args.json or args.output == "json":
        # the znode's raw epoch-milliseconds stay under "timestamp"; "elected_at" is the same moment, readable
        print(json.dumps(info.__dict__ | {"elected_at": elected_at}, indent=2))
    else:
        active = "none" if info.broker_id is None else str(info.broker_id)
        print(f"Active controller: {active}")
        if info.timestamp is not None:
            print(f"Elected at:        {elected_at or info.timestamp}")
        epoch = "none" if info.epoch is None else f"{info.epoch} (zkVersion {info.epoch_zk_version})"
        print(f"Controller epoch:  {epoch}")
    return EXIT_OK if info.broker_id is not None else EXIT_FAILED
