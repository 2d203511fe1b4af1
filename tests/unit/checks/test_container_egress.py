"""ISO-1040 and ISO-1060: the walk of real nftables rulesets and the checks' outcomes.

tests/snapshots/nft/ holds rulesets as `nft -j list ruleset` printed them:
- docker-default.json: Docker's filter chains as Docker (20.10, Debian 12's docker.io) writes
  them through iptables-nft for docker0, loaded into a throwaway network namespace;
- docker-profiled.json and docker-profiled-no-isolation.json: the whole ruleset of the egress
  lab's host (tests/lanes/profile/test_egress_isolation.py: Debian 12, docker.io, docker0 and an IPv6
  network, a published port) once profiled, and once the firewall role has run again with
  firewall_container_egress_isolation false. That lab test fails when the firewall template
  no longer renders their table inet hostcheck, and rewrites them when run with
  HOSTCHECK_RECORD_NFT=tests/snapshots/nft. It also shows the same verdicts with live packets.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from hostcheck.checks import load_registry
from hostcheck.collectors import container_egress
from hostcheck.facts import Unknown
from hostcheck.firewall import egress as ce
from hostcheck.firewall.ruleset import parse_nft_ruleset
from hostcheck.judge import run_check
from tests.helpers import audit_json, policy_result

REGISTRY = load_registry()
NFT = Path(__file__).parents[2] / "snapshots" / "nft"


def ruleset(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((NFT / name).read_text())
    return data


def nft(text: str) -> list[dict[str, Any]]:
    items = parse_nft_ruleset(text)
    assert isinstance(items, list), items
    return items


def judge(egress: Any, items: Any = None) -> Any:
    """ISO-1040 on recorded facts: the bridges (``egress``) and the ruleset (``items``)."""
    firewall = {"nftables": items, "iptables": None}
    return run_check(REGISTRY["ISO-1040"], {"network": {"container_egress": egress, "firewall": firewall}}, None)


def walk(items: list[dict[str, Any]], bridges: list[str], v6: list[str], legacy: list[str]) -> tuple[Any, Any]:
    """The walk's result, and ISO-1040's outcome on the facts it is judged from."""
    egress = {"bridges": bridges, "bridges_v6": v6, "legacy_iptables_tables": legacy}
    return ce.evaluate(items, bridges, v6, legacy), judge(egress, items)


def verdicts(result: Any) -> dict[str, str]:
    return {f"{p['interface']} {p['destination']}": p["verdict"] for p in result["probes"]}


def test_default_docker_host_reaches_every_private_destination() -> None:
    result, outcome = walk(nft(json.dumps(ruleset("docker-default.json"))), ["docker0"], [], [])
    assert set(verdicts(result).values()) == {"reachable"}
    assert outcome.status == "fail" and outcome.measured == len(ce.PROBES_V4)
    assert "169.254.169.254 tcp/80 via docker0" in outcome.detail
    assert "ip filter FORWARD" in outcome.detail


def test_profiled_host_blocks_them_all_ipv4_and_ipv6() -> None:
    result, outcome = walk(nft(json.dumps(ruleset("docker-profiled.json"))), ["br-0123456789ab", "docker0"],
                           ["br-0123456789ab"], [])
    got = verdicts(result)
    assert len(got) == 2 * len(ce.PROBES_V4) + len(ce.PROBES_V6)
    assert set(got.values()) == {"blocked"}, got
    assert got["br-0123456789ab fd00::1 tcp/80"] == "blocked"
    assert outcome.status == "pass" and outcome.measured == 0
    assert "inet hostcheck forward" in outcome.detail and "inet hostcheck input" in outcome.detail


def test_not_root_is_unknown_with_the_reason() -> None:
    outcome = judge(Unknown(container_egress.NEEDS_ROOT))
    assert outcome.status == "unknown" and "needs root" in outcome.detail


def test_an_unmodelled_match_on_the_path_is_unknown_not_a_pass() -> None:
    data = ruleset("docker-profiled.json")
    # an xtables match (e.g. `-m string`) that may accept before the profile's reject
    first = next(i for i, item in enumerate(data["nftables"])
                 if item.get("rule", {}).get("table") == "hostcheck" and item["rule"]["chain"] == "forward")
    extra = copy.deepcopy(data["nftables"][first])
    extra["rule"]["expr"] = [{"xt": {"type": "match", "name": "string"}}, {"accept": None}]
    data["nftables"].insert(first, extra)
    result, outcome = walk(nft(json.dumps(data)), ["docker0"], [], [])
    got = verdicts(result)
    assert got.pop("docker0 172.17.0.1 tcp/8080") == "blocked"
    assert set(got.values()) == {"undetermined"}
    assert outcome.status == "unknown" and "cannot tell" in outcome.detail
    assert "inet hostcheck forward" in outcome.detail


def test_a_certain_drop_wins_over_an_unmodelled_rule_elsewhere() -> None:
    data = ruleset("docker-profiled.json")
    for item in data["nftables"]:
        rule = item.get("rule")
        if rule and rule["chain"] == "DOCKER-USER":
            rule["expr"] = [{"xt": {"type": "match", "name": "string"}}, {"accept": None}]
    result, outcome = walk(nft(json.dumps(data)), ["docker0"], [], [])
    assert set(verdicts(result).values()) == {"blocked"}


def test_legacy_iptables_tables_make_an_open_path_undetermined() -> None:
    result, outcome = walk(nft(json.dumps(ruleset("docker-default.json"))), ["docker0"], [], ["ip filter"])
    assert set(verdicts(result).values()) == {"undetermined"}
    assert "legacy iptables" in outcome.detail


def test_isolation_switched_off_is_reachable() -> None:
    """firewall_container_egress_isolation false: the forward chain accepts container egress,
    the input chain has no reject for the bridges (its policy drop still holds for a port it
    does not open)."""
    result, outcome = walk(nft(json.dumps(ruleset("docker-profiled-no-isolation.json"))), ["docker0"], [], [])
    got = verdicts(result)
    assert got["docker0 192.168.1.1 tcp/80"] == "reachable"
    assert got["docker0 169.254.169.254 tcp/80"] == "reachable"
    assert got["docker0 172.17.0.1 tcp/8080"] == "blocked"
    assert outcome.status == "fail"


def test_no_container_bridge_is_judged_for_docker0_and_says_so() -> None:
    result, outcome = walk(nft(json.dumps(ruleset("docker-profiled.json"))), [], [], [])
    assert result["bridges_assumed"] is True
    assert "judged for docker0" in outcome.detail


@pytest.mark.parametrize("text", ["", "{", "[]", '{"nftables": 3}'])
def test_garbage_is_unknown(text: str) -> None:
    items = parse_nft_ruleset(text)
    assert isinstance(items, Unknown)
    outcome = run_check(REGISTRY["ISO-1040"], {"network": {
        "firewall": {"nftables": items, "iptables": None},
        "container_egress": {"bridges": ["docker0"], "bridges_v6": [], "legacy_iptables_tables": []}}}, None)
    assert outcome.status == "unknown" and "nft output" in outcome.detail


def test_bridges_found_in_sysfs(tmp_path: Path) -> None:
    for name, bridge in (("docker0", True), ("br-abc", True), ("eth0", False), ("veth1", False), ("virbr0", True)):
        (tmp_path / name).mkdir()
        if bridge:
            (tmp_path / name / "bridge").mkdir()
    bridges, _v6 = container_egress.container_bridges(str(tmp_path))
    assert bridges == ["br-abc", "docker0"]


def _raw_facts(tmp_path: Path, nft_file: str, bridges: list[str]) -> Path:
    """A recorded machine with its firewall kept as raw evidence: the ruleset and the bridges."""
    facts = json.loads((NFT.parent / "dedicated-4090.json").read_text())
    facts["network"]["firewall"] = {"nftables": nft(json.dumps(ruleset(nft_file))), "iptables": None}
    facts["network"]["container_egress"] = {"bridges": bridges, "bridges_v6": [], "legacy_iptables_tables": []}
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(facts))
    return path


def _owner_finding(report: dict[str, Any], check_id: str) -> dict[str, Any]:
    finding: dict[str, Any] = next(f for f in report["owner_risk"]["findings"] if f["id"] == check_id)
    return finding


def test_saved_raw_facts_are_judged_again_by_the_audit(tmp_path: Path) -> None:
    """`audit --facts` walks the recorded ruleset with today's rules: nothing was pre-judged."""
    _, open_report = audit_json("--facts", str(_raw_facts(tmp_path, "docker-default.json", ["docker0"])),
                                "--policy", "dedicated-host")
    iso = _owner_finding(open_report, "ISO-1040")
    assert iso["status"] == "warn" and iso["measured"] == len(ce.PROBES_V4)
    assert "ip filter FORWARD" in iso["detail"]
    firewall = next(f for f in policy_result(open_report, "dedicated-host")["findings"] if f["id"] == "NET-1010")
    assert firewall["status"] in ("fail", "warn") and firewall["measured"] == "nftables: input none"

    _, closed_report = audit_json("--facts", str(_raw_facts(tmp_path, "docker-profiled.json", ["docker0"])),
                                  "--policy", "dedicated-host")
    iso = _owner_finding(closed_report, "ISO-1040")
    assert iso["status"] == "pass" and "inet hostcheck forward" in iso["detail"]
    firewall = next(f for f in policy_result(closed_report, "dedicated-host")["findings"] if f["id"] == "NET-1010")
    assert firewall["status"] == "pass" and firewall["measured"] == "nftables: input drop"


# ---- ISO-1060: route_localnet on a bridge, and whether an input chain drops what it lets in --

def loopback(route_localnet: Any, nft_file: str | None, every: Any = 0, items: Any = None) -> Any:
    """ISO-1060 on the bridges' route_localnet, net.ipv4.conf.all's (``every``) and a ruleset
    (a stored one by name, or ``items``)."""
    network: dict[str, Any] = {"route_localnet": route_localnet, "route_localnet_all": every}
    if nft_file is not None:
        items = nft(json.dumps(ruleset(nft_file)))
    if items is not None:
        network["firewall"] = {"nftables": items}
    return run_check(REGISTRY["ISO-1060"], {"network": network}, None)


def without_loopback_drop(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ruleset less the template's `iifname { ... } ip daddr 127.0.0.0/8 drop`."""
    def is_drop(item: dict[str, Any]) -> bool:
        rule = item.get("rule")
        return (isinstance(rule, dict) and rule["chain"] == "input" and {"drop": None} in rule["expr"]
                and "127.0.0.0" in json.dumps(rule["expr"]))
    kept = [item for item in items if not is_drop(item)]
    assert len(kept) == len(items) - 1, "exactly one loopback drop in the stored ruleset"
    return kept


def test_route_localnet_on_a_default_docker_host_is_reachable() -> None:
    """Docker filters only the forward path: nothing stops a container's packet to 127.0.0.1
    on the input path once route_localnet=1, a failure naming the bridge."""
    outcome = loopback({"docker0": 1, "br-0123456789ab": 0}, "docker-default.json")
    assert outcome.status == "fail" and outcome.measured == 1
    assert outcome.detail == "route_localnet=1 on docker0: no nftables chain filters the input path"
    assert "br-0123456789ab" not in outcome.detail


def test_route_localnet_behind_the_profiles_input_chain_passes() -> None:
    outcome = loopback({"docker0": 1, "br-0123456789ab": 1}, "docker-profiled.json")
    assert outcome.status == "pass" and outcome.measured == 0
    assert "dropped in inet hostcheck input" in outcome.detail


def test_route_localnet_all_counts_for_every_bridge() -> None:
    """The kernel ORs net.ipv4.conf.all.route_localnet with each bridge's own value: with all
    at 1, bridges at 0 route loopback-addressed packets too."""
    outcome = loopback({"docker0": 0, "br-0123456789ab": 0}, "docker-default.json", every=1)
    assert outcome.status == "fail" and outcome.measured == 2
    assert "route_localnet=1 on docker0 (from net.ipv4.conf.all)" in outcome.detail
    outcome = loopback({"docker0": 0}, "docker-profiled.json", every=1)
    assert outcome.status == "pass" and "dropped in inet hostcheck input" in outcome.detail


def test_route_localnet_all_unknown_is_not_a_pass() -> None:
    """A bridge at 0 with net.ipv4.conf.all unreadable (or not collected, in facts saved
    before it was): unknown where nothing drops its loopback traffic, a pass where a rule does."""
    unreadable = Unknown("/proc/sys/net/ipv4/conf/all/route_localnet could not be read")
    outcome = loopback({"docker0": 0}, "docker-default.json", every=unreadable)
    assert outcome.status == "unknown" and "net.ipv4.conf.all unknown (/proc/sys" in outcome.detail, outcome
    outcome = loopback({"docker0": 0}, "docker-profiled.json", every=unreadable)
    assert outcome.status == "pass", outcome
    not_collected = run_check(REGISTRY["ISO-1060"], {"network": {
        "route_localnet": {"docker0": 0}, "firewall": {"nftables": nft(json.dumps(ruleset("docker-default.json")))}}},
        None)
    assert not_collected.status == "unknown" and "not collected" in not_collected.detail


def test_without_egress_isolation_the_loopback_drop_alone_blocks_it() -> None:
    """firewall_container_egress_isolation false leaves no reject for the bridges in the
    input chain; the loopback drop is then what stops a container's packet to 127.0.0.1 on
    a port the chain accepts. Without that rule the walk cannot say blocked, whatever the
    port: the chain accepts some ports for everyone."""
    items = nft(json.dumps(ruleset("docker-profiled-no-isolation.json")))
    outcome = loopback({"docker0": 1}, None, items=items)
    assert outcome.status == "pass" and "dropped in inet hostcheck input" in outcome.detail
    outcome = loopback({"docker0": 1}, None, items=without_loopback_drop(items))
    assert outcome.status == "unknown", outcome
    # with isolation on, the bridges' reject stops it too (the drop comes first)
    outcome = loopback({"docker0": 1}, None, items=without_loopback_drop(nft(json.dumps(ruleset("docker-profiled.json")))))
    assert outcome.status == "pass" and "dropped in inet hostcheck input" in outcome.detail


def test_route_localnet_with_an_unmodelled_input_rule_is_unknown() -> None:
    # an input chain whose only rule is an xtables match the walk does not model
    data = copy.deepcopy(ruleset("docker-default.json"))
    data["nftables"] += [
        {"chain": {"family": "ip", "table": "filter", "name": "INPUT", "handle": 900, "type": "filter",
                   "hook": "input", "prio": 0, "policy": "accept"}},
        {"rule": {"family": "ip", "table": "filter", "chain": "INPUT", "handle": 901,
                  "expr": [{"xt": {"type": "match", "name": "addrtype"}}, {"drop": None}]}}]
    outcome = run_check(REGISTRY["ISO-1060"], {"network": {"route_localnet": {"docker0": 1},
                                                           "firewall": {"nftables": nft(json.dumps(data))}}}, None)
    assert outcome.status == "unknown" and "route_localnet=1 on docker0" in outcome.detail


def test_route_localnet_read_per_bridge_without_root(tmp_path: Path) -> None:
    sys_net, conf = tmp_path / "net", tmp_path / "conf"
    for name, bridge, value in (("docker0", True, "1\n"), ("br-abc", True, "0\n"), ("eth0", False, "1\n")):
        (sys_net / name).mkdir(parents=True)
        if bridge:
            (sys_net / name / "bridge").mkdir()
        (conf / name).mkdir(parents=True)
        (conf / name / "route_localnet").write_text(value)
    assert container_egress.route_localnet(str(sys_net), str(conf)) == {"br-abc": 0, "docker0": 1}
    (conf / "br-abc" / "route_localnet").unlink()
    missing = container_egress.route_localnet(str(sys_net), str(conf))
    assert isinstance(missing, Unknown) and "br-abc" in missing.reason


def test_route_localnet_all_read_without_root(tmp_path: Path) -> None:
    (tmp_path / "all").mkdir()
    for text, expected in (("1\n", 1), ("0\n", 0)):
        (tmp_path / "all" / "route_localnet").write_text(text)
        assert container_egress.route_localnet_all(str(tmp_path)) == expected
    (tmp_path / "all" / "route_localnet").write_text("2\n")
    assert isinstance(container_egress.route_localnet_all(str(tmp_path)), Unknown)
    (tmp_path / "all" / "route_localnet").unlink()
    missing = container_egress.route_localnet_all(str(tmp_path))
    assert isinstance(missing, Unknown) and "all/route_localnet" in missing.reason
