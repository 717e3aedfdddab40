"""The ZooKeeper sink builds its set and delete operations itself (kazoo's request values): a path it takes
as it is must be one kazoo's own normalisation leaves unchanged, under any chroot; others go through kazoo."""

from __future__ import annotations

import pytest
from kazoo.client import KazooClient

from sinks.zookeeper import _is_normal, under_chroot

pytestmark = pytest.mark.unit

NORMAL = ["/brokers/topics/t/partitions/0/state", "/controller_epoch", "/a", "/a/b.c-d_e"]
#: taken through kazoo's own normalisation (a name starting with "." included, though kazoo keeps it)
OTHER = ["/", "", "a/b", "/a//b", "/a/b/", "/a/./b", "/a/../b", "/a/.hidden"]


def kazoo_sends(chroot: str, path: str) -> str:
    """The path kazoo's own transaction call puts in its request (a client that never connects)."""
    t = KazooClient(hosts=f"127.0.0.1:1{chroot}").transaction()
    t.set_data(path, b"")
    sent: str = t.operations[-1].path
    return sent


@pytest.mark.parametrize("path", NORMAL)
@pytest.mark.parametrize("chroot", ["", "/", "/livectl", "/deep/root/"])
def test_a_path_taken_as_it_is_is_what_kazoo_would_send(path: str, chroot: str) -> None:
    assert _is_normal(path)
    kazoo_chroot = KazooClient(hosts=f"127.0.0.1:1{chroot}").chroot
    root = under_chroot(kazoo_chroot, "")
    prefixed = ("" if root == "/" else root) + path
    assert prefixed == kazoo_sends(chroot, path)


@pytest.mark.parametrize("path", ["/a//b", "/a/b/", "/a/.hidden", "/controller_epoch"])
@pytest.mark.parametrize("chroot", ["", "/livectl", "/deep/root/"])
def test_a_path_taken_through_normalisation_is_what_kazoo_would_send(path: str, chroot: str) -> None:
    assert under_chroot(KazooClient(hosts=f"127.0.0.1:1{chroot}").chroot, path) == kazoo_sends(chroot, path)


@pytest.mark.parametrize("path", OTHER)
def test_other_paths_are_left_to_kazoo(path: str) -> None:
    assert not _is_normal(path)
