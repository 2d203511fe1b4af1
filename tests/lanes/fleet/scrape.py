"""What the fleet lane needs to watch one lab host the way an operator would: the real `prometheus`
scraping the host's node_exporter, a webhook receiver on the lab network, an outage made on the
host itself.

- Prometheus (this machine's binary) runs in the lab host's own network namespace: it scrapes
  node_exporter on the host's loopback (the firewall role lets loopback in and nothing else) and
  its query API listens there too; nothing of it is on this machine's network.
- The webhook receiver (tests/webhook_receiver.py) listens on the hub's end of the host's link,
  over HTTPS with a certificate from a CA made for this run, which the host is told to trust: the
  role's URLs are https://, and the recorder checks them as it would a real one.
- The outage: an nftables table in the host rejects the recorder's probes (TCP to port 22 on
  loopback), so every target fails while SSH (on host0) and the scrape (port 9100) go on.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import urllib.parse
from pathlib import Path
from typing import Any

from tests.lab.remote import ADMIN
from tests.lab.util import run
from tests.unit.watch.test_watch_alerts import RULES

REPO = Path(__file__).resolve().parents[3]
PROMETHEUS_PORT = 9090
NODE_EXPORTER = "127.0.0.1:9100"
OUTAGE_TABLE = "hostcheck_lab_outage"
# The recorder's targets (the host's own sshd) go silent: dropped, not reset, because a refused
# connection proves the path works and counts as reachable (hostcheck/watch/probes.py).
OUTAGE_RULES = f"""table inet {OUTAGE_TABLE} {{
  chain output {{
    type filter hook output priority 0; policy accept;
    oifname "lo" tcp dport 22 drop
  }}
}}
"""
QUERY = "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())"


def webhook_certificate(folder: Path, ip: str) -> tuple[Path, Path, Path]:
    """A CA and a server certificate for ``ip`` signed by it: (CA certificate, certificate, key)."""
    ca_key, ca, key, csr, cert, ext = (folder / n for n in ("ca.key", "ca.crt", "hook.key", "hook.csr", "hook.crt", "hook.ext"))
    curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run(["openssl", "req", "-x509", *curve, "-days", "2", "-subj", "/CN=hostcheck lab CA", "-keyout", str(ca_key),
         "-out", str(ca), "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign"])
    run(["openssl", "req", "-new", *curve, "-subj", f"/CN={ip}", "-keyout", str(key), "-out", str(csr)])
    ext.write_text(f"subjectAltName=IP:{ip}\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                   "extendedKeyUsage=serverAuth\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n")
    run(["openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
         "-days", "2", "-extfile", str(ext), "-out", str(cert)])
    return ca, cert, key


def trust(host: Any, ca: Path) -> None:
    """Add ``ca`` to the host's system trust store (what Python's default TLS context reads)."""
    host.sudo("cat > /usr/local/share/ca-certificates/hostcheck-lab.crt && update-ca-certificates >/dev/null",
              input=ca.read_text(), check=True)


class WebhookReceiver:
    """tests/webhook_receiver.py as a process in the lab's hub namespace, on ``ip``."""

    def __init__(self, lab: Any, ip: str, cert: Path, key: Path, log: Path) -> None:
        self.log = log
        log.touch()
        lab.ensure_hub()
        self.proc = subprocess.Popen(
            ["nsenter", f"--net=/run/netns/{lab.hub}", sys.executable, "-m", "tests.webhook_receiver", ip, str(cert),
             str(key), str(log)], cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        lab.record_pid("webhook-receiver", self.proc.pid)
        assert self.proc.stdout is not None
        self.url = f"https://{ip}:{int(self.proc.stdout.readline())}"

    def requests(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


class Prometheus:
    """The real `prometheus` in ``host``'s network namespace, scraping its node_exporter (the
    textfile collector only: the rest is not ours to test) and loading the shipped rules."""

    def __init__(self, host: Any, work: Path, interval_s: float) -> None:
        self.netns = host.netns
        config = work / "prometheus.yml"
        config.write_text(json.dumps({
            "global": {"scrape_interval": f"{interval_s:g}s", "evaluation_interval": f"{interval_s:g}s"},
            "rule_files": [str(RULES)],
            "scrape_configs": [{"job_name": "node", "params": {"collect[]": ["textfile"]},
                                "static_configs": [{"targets": [NODE_EXPORTER], "labels": {"instance": host.name}}]}],
        }))
        self.proc = subprocess.Popen(
            ["nsenter", f"--net=/run/netns/{self.netns}", "prometheus", f"--config.file={config}",
             f"--storage.tsdb.path={work / 'tsdb'}", f"--web.listen-address=127.0.0.1:{PROMETHEUS_PORT}"],
            stdout=open(work / "prometheus.log", "wb"), stderr=subprocess.STDOUT)
        host.lab.record_pid(f"{host.name}-prometheus", self.proc.pid)

    def api(self, path: str, **params: str) -> Any:
        url = f"http://127.0.0.1:{PROMETHEUS_PORT}/api/v1/{path}" + ("?" + urllib.parse.urlencode(params) if params else "")
        proc = subprocess.run(["nsenter", f"--net=/run/netns/{self.netns}", sys.executable, "-I", "-S", "-c", QUERY, url],
                              capture_output=True, text=True, timeout=15)
        if proc.returncode != 0:
            return None  # not listening yet
        data = json.loads(proc.stdout)
        assert data["status"] == "success", data
        return data["data"]

    def query(self, expr: str) -> dict[frozenset[tuple[str, str]], float]:
        """Each series' labels (but instance and job) and value now."""
        data = self.api("query", query=expr)
        return {frozenset((k, v) for k, v in r["metric"].items() if k not in ("instance", "job")): float(r["value"][1])
                for r in (data or {"result": []})["result"]}

    def one(self, expr: str) -> float | None:
        values = list(self.query(expr).values())
        return values[0] if len(values) == 1 else None

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


def cut_network(host: Any) -> None:
    host.sudo("nft -f -", input=OUTAGE_RULES, check=True)


def restore_network(host: Any) -> None:
    host.sudo(f"nft delete table inet {OUTAGE_TABLE}", check=True)


BACKUP = ("import sqlite3, sys; source = sqlite3.connect(f'file:{sys.argv[1]}?mode=ro', uri=True); "
          "copy = sqlite3.connect(sys.argv[2]); source.backup(copy); copy.close()")


def copy_recording(host: Any, db: str, into: Path) -> Path:
    """A consistent copy of the host's live recording (SQLite's backup, on the host), fetched to
    ``into``. Never through the container's /proc/<pid>/root: resolving that path lands on this
    machine's own files."""
    # fetched as the admin: a profiled host refuses root logins over SSH
    copy = f"/home/{ADMIN}/recording-copy.db"
    host.sudo(f"python3 -c {shlex.quote(BACKUP)} {shlex.quote(db)} {copy} && chown {ADMIN}: {copy} && chmod 600 {copy}",
              check=True)
    try:
        host.get(copy, into)
    finally:
        host.sudo(f"rm -f {copy}")
    return into
