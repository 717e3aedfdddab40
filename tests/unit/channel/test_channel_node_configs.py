"""The controller's node's own broker configs without a broker: which config requests are the node's, Kafka's
refusals of ``ConfigAdminManager.preprocess``, and the answers at every version Kafka 3.9 serves, written and
read back with kio. (Against a real broker and Kafka's own tools: tests/integration/channel.)"""

from __future__ import annotations

import io
from typing import Any

import pytest
from kio.schema.describe_configs.v0.request import DescribeConfigsRequest as DescribeV0
from kio.schema.describe_configs.v0.request import DescribeConfigsResource as DescribeResourceV0
from kio.schema.describe_configs.v4.request import DescribeConfigsRequest as DescribeV4
from kio.schema.describe_configs.v4.request import DescribeConfigsResource as DescribeResourceV4
from kio.schema.incremental_alter_configs.v1.request import AlterableConfig as Op
from kio.schema.incremental_alter_configs.v1.request import AlterConfigsResource as OpsResource
from kio.schema.incremental_alter_configs.v1.request import IncrementalAlterConfigsRequest
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i8

from channel.answers import PARTLY_SERVED, SERVED
from channel.answers import request_type as answers_request_type
from channel.node_configs import (
    ALTER_CONFIGS,
    BROKER,
    BROKER_LOGGER,
    CONFIGS_SERVED,
    DESCRIBE_CONFIGS,
    INCREMENTAL_ALTER_CONFIGS,
    NodeConfigs,
    Share,
    alter_configs_response,
    config_changes,
    describe_configs_response,
    node_share,
    request_type,
)

pytestmark = pytest.mark.unit

NODE = 1000
TOPIC = 2
SET, DELETE, APPEND = 0, 1, 2
INVALID_REQUEST, INVALID_CONFIG = 42, 40
RATE = "leader.replication.throttled.rate"


def _round_trip(entity: Any) -> Any:
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    back, _ = entity_reader(type(entity))(buf.getvalue(), 0)
    return back


def _ops(*resources: tuple[int, str, tuple[tuple[str, int, str | None], ...]], validate_only: bool = False) -> Any:
    return IncrementalAlterConfigsRequest(
        resources=tuple(
            OpsResource(
                resource_type=i8(kind),
                resource_name=name,
                configs=tuple(Op(name=k, config_operation=i8(op), value=v) for k, op, v in configs),
            )
            for kind, name, configs in resources
        ),
        validate_only=validate_only,
    )


def test_which_requests_are_the_node_s() -> None:
    def describe(*resources: tuple[int, str]) -> Any:
        return DescribeV4(
            resources=tuple(
                DescribeResourceV4(resource_type=i8(k), resource_name=n, configuration_keys=None) for k, n in resources
            )
        )

    assert node_share(describe((BROKER, "1000")), NODE) is Share.ALL
    assert node_share(describe((BROKER_LOGGER, "+1000"), (BROKER, "1000")), NODE) is Share.ALL  # Kafka's toInt
    assert node_share(describe((BROKER, "1")), NODE) is Share.NONE
    assert node_share(describe((BROKER, "")), NODE) is Share.NONE  # the cluster default: any broker answers it
    assert node_share(describe((TOPIC, "1000")), NODE) is Share.NONE
    assert node_share(describe((BROKER, "1000")), None) is Share.NONE  # the node's id not known: forwarded
    assert node_share(describe((BROKER, "1000"), (TOPIC, "t")), NODE) is Share.SOME


def test_describe_lists_the_node_s_dynamic_configs_with_kafka_s_sources_and_synonyms() -> None:
    configs = NodeConfigs(
        own={RATE: "1000", "some.secret": "x"},
        default={RATE: "500", "unclean.leader.election.enable": "false"},
    )
    request = DescribeV4(
        resources=(DescribeResourceV4(resource_type=i8(BROKER), resource_name="1000", configuration_keys=None),),
        include_synonyms=True,
        include_documentation=False,
    )
    (result,) = _round_trip(describe_configs_response(4, request, configs)).results
    assert (int(result.error_code.value), result.resource_name, int(result.resource_type)) == (0, "1000", BROKER)
    entries = {
        str(c.name): (c.value, int(c.config_source), c.is_sensitive, int(c.config_type), c.read_only)
        for c in result.configs
    }
    assert entries == {
        RATE: ("1000", 2, False, 5, False),  # DYNAMIC_BROKER_CONFIG, LONG
        "unclean.leader.election.enable": ("false", 3, False, 1, False),  # DYNAMIC_DEFAULT_BROKER_CONFIG, BOOLEAN
        "some.secret": (None, 2, True, 0, False),  # a type livectl cannot tell: hidden, as Kafka hides it
    }
    rate = next(c for c in result.configs if c.name == RATE)
    assert [(s.name, s.value, int(s.source)) for s in rate.synonyms] == [(RATE, "1000", 2), (RATE, "500", 3)]

    # configuration_keys picks names; no synonyms unless asked; v0 has is_default instead of a source
    picked = DescribeV0(
        resources=(
            DescribeResourceV0(resource_type=i8(BROKER), resource_name="1000", configuration_keys=(RATE, "nope")),
        )
    )
    (old,) = _round_trip(describe_configs_response(0, picked, configs)).results
    assert [(c.name, c.value, c.is_default) for c in old.configs] == [(RATE, "1000", False)]

    # ZooKeeper unreadable: each BROKER resource answers UNKNOWN_SERVER_ERROR with the reason
    (failed,) = describe_configs_response(4, request, None, "cannot read the configs in ZooKeeper: lost").results
    assert (int(failed.error_code.value), failed.error_message, failed.configs) == (
        -1,
        "cannot read the configs in ZooKeeper: lost",
        (),
    )
    # the node's loggers: none, no error
    loggers = DescribeV4(
        resources=(DescribeResourceV4(resource_type=i8(BROKER_LOGGER), resource_name="1000", configuration_keys=None),)
    )
    (none,) = describe_configs_response(4, loggers, configs).results
    assert (int(none.error_code.value), none.configs) == (0, ())


def test_incremental_alter_configs_with_kafka_s_refusals() -> None:
    changes = config_changes(
        INCREMENTAL_ALTER_CONFIGS,
        _ops(
            (BROKER, "1000", ((RATE, SET, "2000"), ("follower.replication.throttled.rate", DELETE, None))),
            (BROKER_LOGGER, "1000", ()),
        ),
    )
    assert [(c.error, dict(c.sets), c.deletes, c.logger) for c in changes] == [
        (0, {RATE: "2000"}, ("follower.replication.throttled.rate",), False),
        (0, {}, (), True),
    ]

    def refusal(*configs: tuple[str, int, str | None], kind: int = BROKER) -> tuple[int, str | None]:
        (change,) = config_changes(INCREMENTAL_ALTER_CONFIGS, _ops((kind, "1000", configs)))
        return change.error, change.message

    assert refusal((RATE, SET, None)) == (INVALID_REQUEST, f"Null value not supported for : {RATE}")
    assert refusal((RATE, SET, "1"), (RATE, DELETE, None)) == (INVALID_REQUEST, "Error due to duplicate config keys")
    assert refusal((RATE, SET, "-5")) == (
        INVALID_REQUEST,
        f"Invalid value -5 for configuration {RATE}: Value must be at least 0",
    )
    assert refusal(("log.retention.ms", SET, "5")) == (INVALID_REQUEST, "Unknown broker config name: log.retention.ms")
    assert refusal((RATE, APPEND, "5")) == (
        INVALID_CONFIG,
        f"Config value append is not allowed for config key: {RATE}",
    )
    assert refusal((RATE, 9, "5")) == (INVALID_REQUEST, "Unknown operations type 9")
    error, message = refusal(("root", SET, "DEBUG"), kind=BROKER_LOGGER)
    assert error == INVALID_CONFIG and message is not None and message.startswith("Logger root does not exist!")
    # a DELETE of a config not set, or not livectl's, is no error (Kafka removes nothing)
    assert refusal(("log.retention.ms", DELETE, None)) == (0, None)

    twice = config_changes(INCREMENTAL_ALTER_CONFIGS, _ops((BROKER, "1000", ()), (BROKER, "1000", ())))
    assert [(c.error, c.message) for c in twice] == [(INVALID_REQUEST, "Each resource must appear at most once.")] * 2


def test_legacy_alter_configs_replaces_the_set() -> None:
    for version in CONFIGS_SERVED[ALTER_CONFIGS]:
        cls = request_type(ALTER_CONFIGS, version)
        module = __import__(cls.__module__, fromlist=["AlterConfigsResource"])
        body = cls(
            resources=(
                module.AlterConfigsResource(
                    resource_type=BROKER,
                    resource_name="1000",
                    configs=(module.AlterableConfig(name=RATE, value="7"),),
                ),
                module.AlterConfigsResource(resource_type=BROKER_LOGGER, resource_name="1000", configs=()),
            ),
            validate_only=False,
        )
        ok, logger = config_changes(ALTER_CONFIGS, body)
        assert (ok.error, dict(ok.replace or {})) == (0, {RATE: "7"})
        assert (logger.error, logger.message) == (INVALID_REQUEST, "Unknown resource type 8")
        response = _round_trip(alter_configs_response(ALTER_CONFIGS, version, [(ok, 0, None), (logger, 42, "x")]))
        assert [(int(r.error_code.value), r.resource_name, int(r.resource_type)) for r in response.responses] == [
            (0, "1000", BROKER),
            (42, "1000", BROKER_LOGGER),
        ]


def test_the_endpoint_reads_kafka_39s_versions_and_forwards_what_is_not_the_node_s() -> None:
    assert dict(CONFIGS_SERVED) == {
        DESCRIBE_CONFIGS: range(0, 5),
        ALTER_CONFIGS: range(0, 3),
        INCREMENTAL_ALTER_CONFIGS: range(0, 2),
    }
    assert set(CONFIGS_SERVED) == PARTLY_SERVED
    for api_key, versions in CONFIGS_SERVED.items():
        assert SERVED[api_key] == versions
        for version in versions:
            cls = answers_request_type(api_key, version)
            assert cls is request_type(api_key, version)
            assert (int(cls.__api_key__), int(cls.__version__)) == (api_key, version)
    for version in CONFIGS_SERVED[INCREMENTAL_ALTER_CONFIGS]:
        response = alter_configs_response(INCREMENTAL_ALTER_CONFIGS, version, [])
        assert _round_trip(response).responses == ()
