"""Run hostcheck's network code inside a lab namespace and print the result as JSON.

``ip netns exec NS python nsrun.py MODE '{json args}'``. Modes:
- ``collect``: the reachability collector (args: stun_servers, public_ranges, probe_url,
  probe_token, probe_ports, port_range, agent_range_file, budget_s);
- ``discover``: RFC 5780 discovery against one server (args: server [host, port]);
- ``probe``: ``request_probe`` against a probe server (args: url, token, ports, timeout);
- ``raw_probe``: POST a raw JSON body to the probe server (args: url, token, body).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from hostcheck.collectors import CollectContext
from hostcheck.facts import to_jsonable


def main() -> None:
    mode, args = sys.argv[1], json.loads(sys.argv[2])
    started = time.monotonic()
    if mode == "collect":
        from hostcheck.collectors import reachability

        budget = float(args.get("budget_s", 10.0))
        ctx = CollectContext(
            offline=bool(args.get("offline", False)),
            budget_s=budget,
            stun_servers=list(args.get("stun_servers", [])),
            probe_url=args.get("probe_url"),
            probe_token=args.get("probe_token"),
            probe_ports=list(args.get("probe_ports", [])),
            public_ranges=list(args.get("public_ranges", [])),
            port_range=args.get("port_range"),
        )
        if "agent_range_file" in args:
            ctx.agent_range_file = str(args["agent_range_file"])
        ctx.deadline = time.monotonic() + budget
        out = to_jsonable(reachability.collect(ctx))
    elif mode == "discover":
        from hostcheck.netprobe.discovery import discover_nat

        res = discover_nat(tuple(args["server"]), deadline=time.monotonic() + float(args.get("budget_s", 10)))
        out = asdict(res)
        out["reason"] = res.reason
    elif mode == "probe":
        from hostcheck.netprobe.probe_client import request_probe

        ports = [(int(p), str(proto)) for p, proto in args["ports"]]
        out = to_jsonable(request_probe(args["url"], args["token"], ports, float(args.get("timeout", 5))))
    elif mode == "raw_probe":
        import urllib.error
        import urllib.request

        req = urllib.request.Request(
            args["url"].rstrip("/") + "/probe",
            data=json.dumps(args["body"]).encode(),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {args['token']}"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                out = {"status": resp.status, "body": json.loads(resp.read() or b"null")}
        except urllib.error.HTTPError as exc:
            out = {"status": exc.code, "body": json.loads(exc.read() or b"null")}
    else:
        raise SystemExit(f"unknown mode {mode}")
    print(json.dumps({"result": out, "elapsed_s": round(time.monotonic() - started, 3)}))


if __name__ == "__main__":
    main()
