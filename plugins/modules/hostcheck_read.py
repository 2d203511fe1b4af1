#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: hostcheck contributors
# Apache-2.0
"""Run one read-only probe on the host and return its output, in a tenth of a command's time.

The JSON-arguments marker below makes Ansible substitute the arguments into this file and pipe
it to the host's Python as it is: no AnsiballZ payload, so no import of
ansible.module_utils.basic, which ansible-core 2.19 compiles from source on every call (about
0.2 s of CPU on a small host, most of what a read costs). The price is that this file imports
nothing but the standard library.
"""
# <<INCLUDE_ANSIBLE_MODULE_JSON_ARGS>>

from __future__ import annotations

DOCUMENTATION = r"""
module: hostcheck_read
short_description: Run a read-only probe and return its output (never reports a change)
description:
  - What the profile's roles use to read the host's state before deciding what to change
    (account databases, C(sshd -T), C(nft list), package states). It returns what
    ansible.builtin.command returns for the same argv, with I(changed) always false, and it
    runs in check mode too, so it is for commands that only read.
  - Runs I(argv) without a shell, with standard input closed and a time limit; or, with I(src),
    returns a file's bytes as ansible.builtin.slurp does.
options:
  argv:
    description: The command and its arguments (no shell; use C([sh, -c, SCRIPT]) for one).
      Exactly one of I(argv) and I(src).
    type: list
    elements: str
  src:
    description: A file to read whole (at most 16 MiB), returned base64-encoded in I(content).
    type: path
  timeout:
    description: Seconds before the probe is killed and the task fails.
    type: int
    default: 120
author: hostcheck contributors
"""

RETURN = r"""
rc:
  description: The command's exit status.
  type: int
  returned: with I(argv)
stdout:
  description: Standard output, trailing newlines removed.
  type: str
  returned: with I(argv)
stderr:
  description: Standard error, trailing newlines removed.
  type: str
  returned: with I(argv)
stdout_lines:
  description: I(stdout) split into lines.
  type: list
  returned: with I(argv)
content:
  description: The file's bytes, base64-encoded (decode with the b64decode filter).
  type: str
  returned: with I(src)
"""

EXAMPLES = r"""
- name: Read the effective sshd settings
  hostcheck_read:
    argv: [sshd, -T]
  register: sshd_settings
"""

import base64
import json
import os
import signal
import subprocess
import sys

ARGS = "<<INCLUDE_ANSIBLE_MODULE_COMPLEX_ARGS>>"
OPTIONS = {"argv", "src", "timeout"}
MAX_FILE = 16 * 1024 * 1024


def finish(result):
    print(json.dumps(result))
    sys.exit(1 if result.get("failed") else 0)


def read_file(src):
    """slurp's answer for SRC: its bytes base64-encoded, or why not."""
    result = {"changed": False, "source": src, "encoding": "base64"}
    try:
        with open(src, "rb") as handle:
            data = handle.read(MAX_FILE + 1)
    except OSError as exc:
        finish(dict(result, failed=True, msg="%s: %s" % (src, exc.strerror or exc)))
    if len(data) > MAX_FILE:
        finish(dict(result, failed=True, msg="%s is larger than %d MiB" % (src, MAX_FILE >> 20)))
    finish(dict(result, content=base64.b64encode(data).decode("ascii")))


def main():
    params = json.loads(ARGS)
    unknown = sorted(k for k in params if k not in OPTIONS and not k.startswith("_ansible_"))
    argv, src, timeout = params.get("argv"), params.get("src"), params.get("timeout", 120)
    if unknown:
        finish({"failed": True, "msg": "hostcheck_read: unsupported parameters: %s" % ", ".join(unknown)})
    if (argv is None) == (src is None):
        finish({"failed": True, "msg": "hostcheck_read: give exactly one of argv and src"})
    if src is not None:
        if not isinstance(src, str) or not src:
            finish({"failed": True, "msg": "hostcheck_read: src must be a path"})
        read_file(src)
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        finish({"failed": True, "msg": "hostcheck_read: argv must be a non-empty list of strings"})
    if isinstance(timeout, str) and timeout.isdigit():
        timeout = int(timeout)
    if not isinstance(timeout, int) or isinstance(timeout, bool) or timeout < 1:
        finish({"failed": True, "msg": "hostcheck_read: timeout must be a positive whole number of seconds"})
    result = {"changed": False, "cmd": argv}
    try:
        # its own session, so a timeout kills whatever it started too, and the pipes close
        child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 start_new_session=True)
    except OSError as exc:
        finish(dict(result, failed=True, rc=exc.errno or 2, stdout="", stderr="", stdout_lines=[],
                    msg="%s: %s" % (argv[0], exc.strerror or exc)))
    try:
        out, err = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.communicate()
        finish(dict(result, failed=True, rc=-1, stdout="", stderr="", stdout_lines=[],
                    msg="%s did not finish within %d s" % (argv[0], timeout)))
    stdout = out.decode("utf-8", "replace").rstrip("\r\n")
    result.update(rc=child.returncode, stdout=stdout, stderr=err.decode("utf-8", "replace").rstrip("\r\n"),
                  stdout_lines=stdout.splitlines())
    if child.returncode != 0:
        result.update(failed=True, msg="non-zero return code")
    finish(result)


if __name__ == "__main__":
    main()
