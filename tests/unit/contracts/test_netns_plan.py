"""The pure parts of the test hosts (bench/harness/netns.py): the address plan, the names, the commands."""

from __future__ import annotations

import pytest

from bench.harness.netns import (
    MAX_HOSTS,
    TBF_HANDLE,
    HostAddresses,
    Shaping,
    choose_subnet,
    host_setup_commands,
    namespace_name,
    parse_namespace_name,
    rule_commands,
    shaping_commands,
    used_subnets,
    veth_names,
)

pytestmark = pytest.mark.unit


def test_each_host_has_a_30_of_its_own_in_the_session_24() -> None:
    seen: set[str] = set()
    for i in range(1, MAX_HOSTS + 1):
        a = HostAddresses(77, i)
        gw, addr = a.gateway, a.address
        assert gw.startswith("10.231.77.") and addr.startswith("10.231.77.")
        last_gw, last = int(gw.rsplit(".", 1)[1]), int(addr.rsplit(".", 1)[1])
        # in one /30 (network 4i, broadcast 4i+3), neither end the network or broadcast address
        assert last_gw // 4 == last // 4 == i and last_gw % 4 == 1 and last % 4 == 2
        assert not {gw, addr} & seen
        seen |= {gw, addr}
    with pytest.raises(ValueError, match="index"):
        HostAddresses(77, MAX_HOSTS + 1)
    with pytest.raises(ValueError, match="index"):
        HostAddresses(77, 0)
    with pytest.raises(ValueError, match="subnet"):
        HostAddresses(256, 1)


def test_names_carry_the_session_and_fit_the_interface_limit() -> None:
    ns = namespace_name(4194304, 12, "zk")
    assert ns == "lvt4194304-12-zk"
    assert parse_namespace_name(ns) == (4194304, 12, "zk")
    assert parse_namespace_name("someone-elses") is None
    assert parse_namespace_name("lvtx-1-a") is None
    root, inner = veth_names(4194304, MAX_HOSTS)
    assert len(inner) <= 15 and inner == root + "p"
    with pytest.raises(ValueError, match="host"):
        namespace_name(1, 1, "Bad_Name")


def test_a_cut_is_a_blackhole_rule_each_way_and_healing_deletes_the_same() -> None:
    add = rule_commands("add", "10.231.5.6", "10.231.5.10")
    assert add == [
        ["ip", "rule", "add", "from", "10.231.5.6", "to", "10.231.5.10", "blackhole"],
        ["ip", "rule", "add", "from", "10.231.5.10", "to", "10.231.5.6", "blackhole"],
    ]
    assert [c[3:] for c in rule_commands("del", "10.231.5.6", "10.231.5.10")] == [c[3:] for c in add]
    with pytest.raises(ValueError, match="action"):
        rule_commands("flush", "10.231.5.6", "10.231.5.10")
    with pytest.raises(ValueError, match="b: an IPv4 address"):
        rule_commands("add", "10.231.5.6", "10.231")


def test_a_host_is_made_with_a_default_route_through_the_root() -> None:
    cmds = host_setup_commands("lvt1-2-a", HostAddresses(2, 3), ("lv1h3", "lv1h3p"))
    assert cmds[0] == ["ip", "netns", "add", "lvt1-2-a"]
    assert ["ip", "addr", "add", "10.231.2.13/30", "dev", "lv1h3"] in cmds
    assert ["ip", "-n", "lvt1-2-a", "addr", "add", "10.231.2.14/30", "dev", "lv1h3p"] in cmds
    assert cmds[-1] == ["ip", "-n", "lvt1-2-a", "route", "add", "default", "via", "10.231.2.13"]


def test_the_session_24_is_one_nobody_uses() -> None:
    used = used_subnets(["127.0.0.1/8", "10.231.9.1/30", "10.231.10.2", "10.23.11.1/24", "192.0.2.2/24"])
    assert used == {9, 10}
    assert choose_subnet(8, used) == 11  # 8 -> (8 % 250) + 1 = 9, taken; 10 taken; 11
    assert choose_subnet(8, set()) == 9
    assert 1 <= choose_subnet(10**6, set()) <= 250


def test_a_degraded_link_shapes_only_the_peers_packets_through_one_tbf() -> None:
    cmds = shaping_commands("lv1h3p", "dst", ["10.231.9.6", "10.231.9.10"], Shaping("8kbit", "1600b", "3000b"), "ns1")
    assert all(c[:3] == ["tc", "-n", "ns1"] for c in cmds)
    root, cls, tbf, *filters = (c[3:] for c in cmds)
    # an htb root with no default class: what no filter picks goes straight through, unshaped
    assert root == ["qdisc", "add", "dev", "lv1h3p", "root", "handle", "1:", "htb"]
    assert cls[:8] == ["class", "add", "dev", "lv1h3p", "parent", "1:", "classid", "1:1"]
    assert tbf == [
        "qdisc", "add", "dev", "lv1h3p", "parent", "1:1", "handle", TBF_HANDLE,
        "tbf", "rate", "8kbit", "burst", "1600b", "limit", "3000b",
    ]  # fmt: skip
    assert [f[f.index("match") :] for f in filters] == [
        ["match", "ip", "dst", "10.231.9.6/32", "flowid", "1:1"],
        ["match", "ip", "dst", "10.231.9.10/32", "flowid", "1:1"],
    ]
    # the root namespace's end matches what the peers send
    from_root = shaping_commands("lv1h3", "src", ["10.231.9.6"], Shaping(), None)
    assert from_root[0][:2] == ["tc", "qdisc"] and from_root[-1][-4:] == ["src", "10.231.9.6/32", "flowid", "1:1"]
    with pytest.raises(ValueError, match="match"):
        shaping_commands("d", "both", ["10.231.9.6"], Shaping(), None)
    with pytest.raises(ValueError, match="peers"):
        shaping_commands("d", "dst", [], Shaping(), None)
    with pytest.raises(ValueError, match="IPv4"):
        shaping_commands("d", "dst", ["zookeeper-1"], Shaping(), None)
