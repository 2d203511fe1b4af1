"""The hostcheck_manifest module on its own, run by real Ansible on this machine against
files in a temporary directory only, and interfaces in a network namespace of its own (no
account, unit, package or sysctl of this machine is touched: those kinds are exercised on lab
hosts by test_profile_lifecycle.py and test_egress_isolation.py).

Record, change, roll back, compare byte for byte: content, mode, owner, symlink targets,
absence. Plus: the first record wins, check mode writes nothing, a rollback that fails
midway keeps the entries it could not undo so that a rerun finishes the job.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.lanes.profile import play

pytestmark = [pytest.mark.ansible, pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="the module records owners and refuses to run without root")]

LIBRARY = play.REPO / "roles/rollback_manifest/library"


def manifest(tmp: Path, check: bool = False, netns: str | None = None, **args: Any) -> dict[str, Any]:
    """One call of the module; inside network namespace ``netns`` when given."""
    args.setdefault("path", str(tmp / "state" / "manifest.json"))
    inside = ["ip", "netns", "exec", netns] if netns else []
    argv = [*inside, str(play.VENV_BIN / "ansible"), "localhost", "-c", "local", "-M", str(LIBRARY),
            "-m", "hostcheck_manifest", "-a", json.dumps(args), "-o"]
    if check:
        argv.append("--check")
    env = play.ansible_env({"ANSIBLE_PYTHON_INTERPRETER": str(play.VENV_BIN / "python"),
                            "ANSIBLE_INVENTORY_UNPARSED_WARNING": "False", "ANSIBLE_LOCALHOST_WARNING": "False"})
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    line = proc.stdout.strip().splitlines()[-1]
    _, _, payload = line.partition("=> ")
    result = json.loads(payload)
    result["_rc"] = proc.returncode
    return result


def state(path: Path) -> tuple[Any, ...] | None:
    if not os.path.lexists(path):
        return None
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return ("link", os.readlink(path), st.st_uid, st.st_gid)
    if stat.S_ISDIR(st.st_mode):
        return ("dir", stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid)
    return ("file", path.read_bytes(), stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid)


@pytest.fixture()
def tree(tmp_path: Path) -> dict[str, Path]:
    root = tmp_path / "etc"
    root.mkdir()
    paths = {
        "edited": root / "edited.conf", "absent": root / "new.conf", "link": root / "link",
        "newdir": root / "newdir", "newfile_in_dir": root / "newdir" / "x.conf", "owned": root / "owned.conf",
        "tree": root / "tree", "deleted": root / "deleted.conf",
    }
    paths["edited"].write_bytes(b"original\n\x00binary ok\n")
    paths["edited"].chmod(0o640)
    paths["owned"].write_text("owned\n")
    os.chown(paths["owned"], 1, 1)
    paths["link"].symlink_to("edited.conf")
    paths["deleted"].write_text("keep me\n")
    return paths


def test_record_change_rollback_restores_everything(tmp_path: Path, tree: dict[str, Path]) -> None:
    before = {k: state(p) for k, p in tree.items()}
    rec = manifest(tmp_path, role="t", files=[str(tree[k]) for k in
                                               ("edited", "absent", "link", "newdir", "newfile_in_dir", "owned", "deleted")],
                   trees=[str(tree["tree"])])
    assert rec["_rc"] == 0 and rec["changed"], rec
    saved = tmp_path / "state"
    assert stat.S_IMODE(saved.stat().st_mode) == 0o700
    assert stat.S_IMODE((saved / "manifest.json").stat().st_mode) == 0o600

    tree["edited"].write_text("changed\n")
    tree["edited"].chmod(0o666)
    tree["absent"].write_text("created\n")
    tree["link"].unlink()
    tree["link"].symlink_to("elsewhere")
    tree["newdir"].mkdir()
    tree["newfile_in_dir"].write_text("x\n")
    os.chown(tree["owned"], 0, 0)
    tree["tree"].mkdir()
    (tree["tree"] / "deep").mkdir()
    (tree["tree"] / "deep" / "data").write_text("data\n")
    tree["deleted"].unlink()

    rb = manifest(tmp_path, role="t", action="rollback")
    assert rb["_rc"] == 0 and rb["changed"], rb
    assert {k: state(p) for k, p in tree.items()} == before
    assert json.loads((saved / "manifest.json").read_text())["entries"] == []
    cleanup = manifest(tmp_path, action="cleanup")
    assert cleanup["_rc"] == 0 and not saved.exists()


def test_first_record_wins(tmp_path: Path, tree: dict[str, Path]) -> None:
    manifest(tmp_path, role="t", files=[str(tree["edited"])])
    tree["edited"].write_text("profile's version\n")
    again = manifest(tmp_path, role="t", files=[str(tree["edited"])])
    assert again["changed"] is False and again["recorded"] == []
    manifest(tmp_path, role="t", action="rollback")
    assert tree["edited"].read_bytes() == b"original\n\x00binary ok\n"


def test_check_mode_writes_nothing(tmp_path: Path, tree: dict[str, Path]) -> None:
    rec = manifest(tmp_path, check=True, role="t", files=[str(tree["edited"])])
    assert rec["changed"] and rec["recorded"][0]["key"] == str(tree["edited"])
    assert not (tmp_path / "state").exists()
    manifest(tmp_path, role="t", files=[str(tree["edited"])])
    tree["edited"].write_text("changed\n")
    rb = manifest(tmp_path, check=True, role="t", action="rollback")
    assert rb["changed"] and rb["undone"] == [{"file": str(tree["edited"]), "action": "restore"}]
    assert tree["edited"].read_text() == "changed\n"


def test_roles_roll_back_independently(tmp_path: Path, tree: dict[str, Path]) -> None:
    manifest(tmp_path, role="a", files=[str(tree["edited"])])
    manifest(tmp_path, role="b", files=[str(tree["absent"])])
    tree["edited"].write_text("a\n")
    tree["absent"].write_text("b\n")
    manifest(tmp_path, role="b", action="rollback")
    assert not tree["absent"].exists() and tree["edited"].read_text() == "a\n"
    status = manifest(tmp_path, action="status")
    assert status["entries"] == {"a": 1}


def test_non_empty_directory_created_by_the_profile_is_kept_and_reported(tmp_path: Path, tree: dict[str, Path]) -> None:
    """Only trees are removed with their content; a plain directory may hold someone's data."""
    manifest(tmp_path, role="t", files=[str(tree["newdir"])])
    tree["newdir"].mkdir()
    (tree["newdir"] / "data").write_text("someone's\n")
    rb = manifest(tmp_path, role="t", action="rollback")
    assert rb["_rc"] == 0 and (tree["newdir"] / "data").exists()
    assert "not empty" in rb["kept"][0]["why"]


def test_failed_undo_stays_in_the_manifest_for_a_rerun(tmp_path: Path, tree: dict[str, Path]) -> None:
    manifest(tmp_path, role="t", files=[str(tree["absent"]), str(tree["edited"])])
    tree["edited"].write_text("changed\n")
    tree["absent"].write_text("created\n")
    # An immutable parent directory makes every undo in it fail, as a real I/O error would.
    blocker = tree["edited"].parent
    subprocess.run(["chattr", "+i", str(blocker)], check=False, capture_output=True)
    flags = subprocess.run(["lsattr", "-d", str(blocker)], capture_output=True, text=True).stdout.split(" ")[0]
    if "i" not in flags:
        pytest.skip("this filesystem does not support the immutable attribute needed to make an undo fail")
    try:
        rb = manifest(tmp_path, role="t", action="rollback")
    finally:
        subprocess.run(["chattr", "-i", str(blocker)], check=True)
    assert rb["_rc"] != 0 and rb["errors"], rb
    assert len(json.loads((tmp_path / "state/manifest.json").read_text())["entries"]) == 2
    rb2 = manifest(tmp_path, role="t", action="rollback")
    assert rb2["_rc"] == 0
    assert not tree["absent"].exists() and tree["edited"].read_bytes() == b"original\n\x00binary ok\n"


def test_iptables_rule_absence_is_recorded_once_and_rollback_with_nothing_to_delete_finishes(tmp_path: Path) -> None:
    """Where iptables is not installed (this machine), a rule cannot exist: its absence is
    recorded (a daemon installed later may add it), a second record adds nothing, and the
    rollback finds nothing to delete and empties the manifest. Deleting a rule dockerd added
    is proven with packets on a lab host (tests/lanes/profile/test_egress_isolation.py)."""
    if subprocess.run(["sh", "-c", "command -v iptables"], capture_output=True).returncode == 0:
        pytest.skip("iptables is installed here: this test would read the machine's own rules")
    rule = "nat POSTROUTING -o docker0 -m addrtype --src-type LOCAL -j MASQUERADE"
    first = manifest(tmp_path, role="t", iptables_rules=[rule])
    assert first["_rc"] == 0 and [e["key"] for e in first["recorded"]] == [rule], first
    again = manifest(tmp_path, role="t", iptables_rules=[rule])
    assert again["_rc"] == 0 and again["recorded"] == [] and again["changed"] is False, again
    rb = manifest(tmp_path, role="t", action="rollback")
    assert rb["_rc"] == 0 and rb["undone"] == [] and rb["errors"] == [], rb
    assert json.loads((tmp_path / "state/manifest.json").read_text())["entries"] == []


@pytest.fixture()
def netns() -> Iterator[str]:
    """A network namespace of this test's own, with Docker-like bridges and no traffic."""
    name = f"hc-manifest-{os.getpid()}"
    if subprocess.run(["ip", "netns", "add", name], capture_output=True).returncode != 0:
        pytest.skip("cannot create a network namespace here")
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=True)


def inside(netns: str, command: str) -> str:
    proc = subprocess.run(["ip", "netns", "exec", netns, "sh", "-ec", command], capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def route_localnet(netns: str) -> dict[str, str]:
    out = inside(netns, "for d in /proc/sys/net/ipv4/conf/*/; do n=${d%/}; echo ${n##*/} $(cat $d/route_localnet); done")
    return dict(line.split() for line in out.splitlines())


ROUTE_LOCALNET = {"key": "net.ipv4.conf.{interface}.route_localnet", "interfaces": "docker0|br-[0-9a-f]{12}",
                  "value": "0"}


def test_sysctl_default_covers_bridges_created_after_the_record(tmp_path: Path, netns: str) -> None:
    """A bridge present at the record gets its own value back (1 stays 1); one created later,
    as dockerd does for a new network, gets the default; an interface the pattern does not name
    is left alone; a second record adds nothing."""
    inside(netns, "ip link add docker0 type bridge; ip link add br-0123456789ab type bridge; "
                  "echo 1 > /proc/sys/net/ipv4/conf/br-0123456789ab/route_localnet")
    before = route_localnet(netns)
    rec = manifest(tmp_path, netns=netns, role="t", sysctl_defaults=[ROUTE_LOCALNET])
    assert rec["_rc"] == 0, rec
    assert sorted(e["key"] for e in rec["recorded"]) == sorted([
        "net.ipv4.conf.br-0123456789ab.route_localnet", "net.ipv4.conf.docker0.route_localnet", ROUTE_LOCALNET["key"]])
    again = manifest(tmp_path, netns=netns, role="t", sysctl_defaults=[{**ROUTE_LOCALNET, "value": "1"}])
    assert again["_rc"] == 0 and again["recorded"] == [], again
    # what dockerd does with userland-proxy off, to the bridges it has and to a new network's
    inside(netns, "ip link add br-aaaaaaaaaaaa type bridge; ip link add lab0 type bridge; "
                  "for i in docker0 br-0123456789ab br-aaaaaaaaaaaa lab0; do "
                  "echo 1 > /proc/sys/net/ipv4/conf/$i/route_localnet; done")
    rb = manifest(tmp_path, netns=netns, role="t", action="rollback")
    assert rb["_rc"] == 0 and rb["errors"] == [], rb
    after = route_localnet(netns)
    assert after == {**before, "br-aaaaaaaaaaaa": "0", "lab0": "1"}, after
    assert before["br-0123456789ab"] == "1" and before["docker0"] == "0"
    assert json.loads((tmp_path / "state/manifest.json").read_text())["entries"] == []


def test_sysctl_default_with_bridges_covers_a_bridge_whatever_its_name(tmp_path: Path, netns: str) -> None:
    """With ``bridges``, a bridge created after the record under a name of its own (a Docker
    network's com.docker.network.bridge.name) gets the default too; an interface that is not a
    bridge and not named by the pattern is still left alone."""
    rec = manifest(tmp_path, netns=netns, role="t", sysctl_defaults=[{**ROUTE_LOCALNET, "bridges": True}])
    assert rec["_rc"] == 0, rec
    inside(netns, "ip link add mynet0 type bridge; ip link add veth0 type veth peer name veth1; "
                  "for i in mynet0 veth0; do echo 1 > /proc/sys/net/ipv4/conf/$i/route_localnet; done")
    rb = manifest(tmp_path, netns=netns, role="t", action="rollback")
    assert rb["_rc"] == 0 and rb["errors"] == [], rb
    after = route_localnet(netns)
    assert (after["mynet0"], after["veth0"]) == ("0", "1"), after


def test_sysctl_default_rejects_a_key_without_the_interface_placeholder(tmp_path: Path, netns: str) -> None:
    bad = manifest(tmp_path, netns=netns, role="t",
                   sysctl_defaults=[{**ROUTE_LOCALNET, "key": "net.ipv4.conf.all.route_localnet"}])
    assert bad["_rc"] != 0 and "{interface}" in bad["msg"], bad
