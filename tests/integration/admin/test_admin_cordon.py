"""``livectl brokers --cordon N`` / ``--uncordon N`` against the real ZooKeeper (issue 44, item 1): the set in
``/livectl/cordoned_brokers``, shown by ``brokers list`` (text and JSON), skipped by ``reassign --generate``."""

from __future__ import annotations

import json

import pytest
from admin_env import Env, env, write_tree

from admin.cli import main
from core.cordon import CORDONED_BROKERS

pytestmark = pytest.mark.integration
__all__ = ["env"]


def _znode(env: Env) -> object:
    data, _ = env.zk.get(CORDONED_BROKERS)
    return json.loads(data)


def test_cordon_list_and_uncordon(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    write_tree(env.zk)  # brokers 1, 2, 3
    assert main(env.args("brokers", "--cordon", "2", write=False)) == 0
    assert capsys.readouterr().out == "Broker 2 cordoned: no new replica is placed on it (cordoned brokers: 2).\n"
    assert _znode(env) == {"version": 1, "brokers": [2]}
    assert main(env.args("brokers", "--cordon", "7", write=False)) == 0
    assert capsys.readouterr().out.splitlines() == [
        "Broker 7 cordoned: no new replica is placed on it (cordoned brokers: 2, 7).",
        "Note: broker 7 is not registered under /brokers/ids.",
    ]
    assert main(env.args("brokers", "--cordon", "2", write=False)) == 0
    assert capsys.readouterr().out == "Broker 2 was already cordoned (cordoned brokers: 2, 7).\n"
    assert main(env.args("brokers", "list", write=False)) == 0
    out = capsys.readouterr().out.splitlines()
    assert [ln.split()[0] for ln in out[1:4]] == ["1", "2", "3"]
    assert out[2].endswith("(cordoned)") and not out[1].endswith("(cordoned)")
    assert out[4] == "cordoned, not registered: 7"
    assert main(env.args("brokers", "list", "--json", write=False)) == 0
    listing = json.loads(capsys.readouterr().out)
    assert {b: r["cordoned"] for b, r in listing.items()} == {"1": False, "2": True, "3": False}
    assert main(env.args("brokers", "--uncordon", "7", write=False)) == 0
    assert capsys.readouterr().out == "Broker 7 uncordoned: it takes new replicas again (cordoned brokers: 2).\n"
    assert main(env.args("brokers", "--uncordon", "3", write=False)) == 0
    assert capsys.readouterr().out.startswith("Broker 3 was not cordoned")
    assert _znode(env) == {"version": 1, "brokers": [2]}


def test_bad_input_names_the_option(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(env.args("brokers", "--cordon", "-1", write=False)) == 2
    assert "error: --cordon: must be a broker id (0 or more), got -1" in capsys.readouterr().err
    assert main(env.args("brokers", write=False)) == 2
    assert (
        "give a command (list), or --cordon N, --uncordon N, --drain N or --cancel-drain N" in capsys.readouterr().err
    )
    env.zk.create(CORDONED_BROKERS, b"not json", makepath=True)
    assert main(env.args("brokers", "--cordon", "1", write=False)) == 1
    assert "/livectl/cordoned_brokers holds something else than livectl wrote" in capsys.readouterr().err


def test_reassign_generate_skips_a_cordoned_broker(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    write_tree(env.zk)
    env.zk.create("/brokers/ids/4", env.zk.get("/brokers/ids/3")[0])
    move = env.tmp / "move.json"
    move.write_text('{"version":1,"topics":[{"topic":"orders"}]}')
    argv = ("reassign", "--generate", "--topics-to-move-json-file", str(move), "--broker-list", "1,2,3,4")
    assert main(env.args(*argv)) == 0
    before = json.loads(capsys.readouterr().out.splitlines()[4])
    assert any(4 in e["replicas"] for e in before["partitions"])
    assert main(env.args("brokers", "--cordon", "4", write=False)) == 0
    capsys.readouterr()
    assert main(env.args(*argv)) == 0
    captured = capsys.readouterr()
    proposed = json.loads(captured.out.splitlines()[4])
    assert all(4 not in e["replicas"] for e in proposed["partitions"])
    assert "Skipping cordoned broker(s) 4 of --broker-list" in captured.err
    assert main(env.args(*argv[:-1], "1,4")) == 1, "replication factor 2 over one uncordoned broker"
    assert "1 cordoned: 4" in capsys.readouterr().err


def test_brokers_list_marks_a_draining_broker(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    from admin.drain import DrainRecord, drain_path

    write_tree(env.zk)
    env.zk.create(drain_path(3), DrainRecord(10, -1).encode(), makepath=True)
    assert main(env.args("brokers", "--cordon", "3", write=False)) == 0
    capsys.readouterr()
    assert main(env.args("brokers", "list", write=False)) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[3].endswith("(draining)") and not out[2].endswith(")")
    assert main(env.args("brokers", "list", "--json", write=False)) == 0
    listing = json.loads(capsys.readouterr().out)
    assert {b: (r["cordoned"], r["draining"]) for b, r in listing.items()} == {
        "1": (False, False),
        "2": (False, False),
        "3": (True, True),
    }
