"""The ZooKeeper sink builds its set and delete operations itself (kazoo's request values): a path it takes
as it is must be one kazoo's own normalisation leaves unchanged, under any chroot; others go through kazoo."""

from __future__ import annotations

import pytest
from kazoo.protocol.paths import _prefix_root

from sinks.zookeeper import _is_normal

pytestmark = pytest.mark.unit

NORMAL = ["/brokers/topics/t/partitions/0/state", "/controller_epoch", "/a", "/a/b.c-d_e"]
#: taken through kazoo's own normalisation (a name starting with "." included, though kazoo keeps it)
OTHER = ["/", "", "a/b", "/a//b", "/a/b/", "/a/./b", "/a/../b", "/a/.hidden"]


@pytest.mark.parametrize("path", NORMAL)
@pytest.mark.parametrize("chroot", ["", "/", "/livectl", "/deep/root/"])
def test_a_path_taken_as_it_is_is_what_kazoo_would_send(path: str, chroot: str) -> None:
    assert _is_normal(path)
    root = _prefix_root(chroot, "")
    prefixed = ("" if root == "/" else root) + path
    assert prefixed == _prefix_root(chroot, path)


@pytest.mark.parametrize("path", OTHER)
def test_other_paths_are_left_to_kazoo(path: str) -> None:
    assert not _is_normal(path)
