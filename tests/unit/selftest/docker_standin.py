"""A stand-in for the `docker` command, for machines where `docker run --gpus all` cannot work
(no GPU, no NVIDIA runtime): the lab hosts run the real daemon for what needs no GPU.

`run` reads the options hostcheck passes the way docker does, refuses any it does not know,
and then runs the container's command as the container would: its entrypoint (python3) is
this machine's Python with no site-packages (-S: a bare image's interpreter), the read-only
bind mounts are the only extra paths it sees (linked into a private directory), and its
environment is the -e variables, with nothing of the caller's but PATH and the CUDA
stand-in's scenario (HC_FAKE_CUDA). `kill --signal SIG NAME` and `kill NAME` signal it by its
name. HC_DOCKER_SAY="STATUS:MESSAGE" makes `run` fail as the daemon does: MESSAGE on stderr,
exit STATUS. Each call's arguments are appended to $HC_DOCKER_STATE/calls (one JSON list a line).
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

VALUED = {"--pull", "--name", "--gpus", "-e", "--network", "--security-opt", "--mount", "--entrypoint"}
FLAGS = {"--rm"}


def run(args: list[str], state: Path) -> int:
    said = os.environ.get("HC_DOCKER_SAY")
    if said:
        status, message = said.split(":", 1)
        sys.stderr.write(message + "\n")
        return int(status)
    options: dict[str, list[str]] = {}
    i = 0
    while args[i].startswith("-"):
        if args[i] in FLAGS:
            options.setdefault(args[i], []).append("")
            i += 1
        elif args[i] in VALUED:
            options.setdefault(args[i], []).append(args[i + 1])
            i += 2
        else:
            sys.stderr.write(f"unknown flag: {args[i]}\n")
            return 125
    command = args[i + 1:]
    if options.get("--entrypoint") != ["python3"]:
        sys.stderr.write("the stand-in runs python3 entrypoints only\n")
        return 125
    with tempfile.TemporaryDirectory() as root:
        remap: dict[str, str] = {}
        for mount in options.get("--mount", []):
            fields = dict(f.partition("=")[::2] for f in next(csv.reader([mount])))
            assert fields == {"type": "bind", "source": fields["source"], "target": fields["target"], "readonly": ""}, mount
            host, inside = fields["source"], fields["target"]
            link = Path(root) / inside.strip("/")
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(host)
            remap[str(Path(inside).parent)] = str(link.parent)
        env = {"PATH": os.environ["PATH"], "HC_FAKE_CUDA": os.environ.get("HC_FAKE_CUDA", "")}
        for pair in options.get("-e", []):
            key, value = pair.split("=", 1)
            env[key] = remap.get(value, value)
        child = subprocess.Popen([sys.executable, "-S", *command], env=env, cwd=root)
        (state / f"{options['--name'][0]}.pid").write_text(str(child.pid))
        signal.signal(signal.SIGINT, lambda *_: child.send_signal(signal.SIGINT))  # docker run's --sig-proxy
        return child.wait()


def kill(args: list[str], state: Path) -> int:
    sig = signal.SIGKILL
    if args[0] == "--signal":
        sig, args = getattr(signal, f"SIG{args[1]}"), args[2:]
    try:
        os.kill(int((state / f"{args[0]}.pid").read_text()), sig)
    except (OSError, ValueError):
        return 1
    return 0


def main() -> int:
    state = Path(os.environ["HC_DOCKER_STATE"])
    with (state / "calls").open("a") as calls:
        calls.write(json.dumps(sys.argv[1:]) + "\n")
    verb, args = sys.argv[1], sys.argv[2:]
    return {"run": run, "kill": kill}[verb](args, state)


if __name__ == "__main__":
    sys.exit(main())
