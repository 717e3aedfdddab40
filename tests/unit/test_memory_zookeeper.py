"""The tests' one in-memory ZooKeeper (:class:`sinks.memory.MemoryZooKeeper`) keeps ZooKeeper's rules, and
the core tests' :class:`core_support.FakeZk` applies the controller's writes through it."""

from __future__ import annotations

import pytest
from core_support import FakeZk, ZkConflictError

from core.decisions import ZkOp, ZkWrite
from sinks.memory import MemoryZooKeeper, ZkRefusedError

pytestmark = pytest.mark.unit


def test_delete_of_a_znode_with_children_is_refused_unless_recursive() -> None:
    zk = MemoryZooKeeper()
    zk.create("/admin/delete_topics/t", b"", make_parents=True)
    with pytest.raises(ZkRefusedError) as e:
        zk.delete("/admin/delete_topics")
    assert (e.value.code, e.value.path) == ("NotEmpty", "/admin/delete_topics")
    assert zk.exists("/admin/delete_topics/t")
    zk.delete_tree("/admin")
    assert not zk.exists("/admin") and not zk.exists("/admin/delete_topics/t")
    assert zk.exists("/")


def test_create_needs_its_parent_and_set_and_delete_check_the_version() -> None:
    zk = MemoryZooKeeper()
    with pytest.raises(ZkRefusedError) as e:
        zk.create("/brokers/topics/t", b"{}")
    assert (e.value.code, e.value.path) == ("NoNode", "/brokers/topics")  # the missing parent
    zk.create("/brokers/topics/t", b"{}", make_parents=True)
    assert zk.set("/brokers/topics/t", b'{"v":1}', version=0) == 1
    with pytest.raises(ZkRefusedError) as e:
        zk.delete("/brokers/topics/t", version=0)
    assert e.value.code == "BadVersion"
    zk.delete("/brokers/topics/t", version=1)
    assert zk.children("/brokers/topics") == []


def test_fake_zk_refuses_a_plain_delete_of_a_znode_with_children() -> None:
    fake = FakeZk()
    fake.apply([ZkWrite(ZkOp.CREATE, "/brokers/topics/t/partitions/0/state", "{}", make_parents=True)])
    with pytest.raises(ZkConflictError, match="NotEmpty delete /brokers/topics/t"):
        fake.apply([ZkWrite(ZkOp.DELETE, "/brokers/topics/t")])
    fake.apply([ZkWrite(ZkOp.DELETE_TREE, "/brokers/topics/t")])
    assert "/brokers/topics/t" not in fake.nodes
    assert "/brokers/topics/t/partitions/0/state" not in fake.nodes


def test_fake_zk_keeps_a_delete_of_a_gone_znode_as_the_sinks_report_it() -> None:
    fake = FakeZk()
    gone = ZkWrite(ZkOp.DELETE, "/config/topics/gone")
    fake.apply([gone])
    assert fake.refused == [(gone, "NoNode")]
    assert fake.history == [gone]


def test_fake_zk_shows_znodes_as_text_and_takes_them_as_a_test_places_them() -> None:
    fake = FakeZk()
    fake.nodes["/admin/delete_topics/t"] = (None, 0)
    fake.nodes["/controller_epoch"] = ("7", 3)
    assert fake.get("/controller_epoch") == "7"
    assert fake.nodes["/admin/delete_topics/t"] == (None, 0)
    assert sorted(fake.nodes) == ["/admin/delete_topics/t", "/controller_epoch"]
    fake.apply([ZkWrite(ZkOp.SET, "/controller_epoch", "8", expected_version=3)])
    assert fake.nodes["/controller_epoch"] == ("8", 4)
    with pytest.raises(ZkConflictError, match="BadVersion"):
        fake.apply([ZkWrite(ZkOp.SET, "/controller_epoch", "9", expected_version=3)])
