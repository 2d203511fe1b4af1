"""What recorded sudoers grant an account: the checks' side of a collector's
:func:`hostcheck.knowledge.sudoers.includes.record`. A collector keeps the files as read and each
account's name, uid, groups and gids; the checks replay the files and match the account here,
so a saved facts file is judged by the rules of the hostcheck that reads it."""

from __future__ import annotations

from typing import Any

from hostcheck.facts import Unknown
from hostcheck.knowledge.sudoers import includes, matching

ROOT_ONLY = 'sudo rules are readable only by root; run `sudo "$(command -v hostcheck)" audit`'


def replayed(recorded: Any) -> includes.Loaded | Unknown:
    """The rules a record holds, or why they are unknown; when the record is there but the main
    file could not be read, the reason says that it takes root."""
    loaded = includes.replay(recorded)
    if isinstance(loaded, Unknown) and isinstance(recorded, dict):
        return Unknown(f"{loaded.reason}: {ROOT_ONLY}")
    return loaded


def account_grants(loaded: includes.Loaded | Unknown, account: dict[str, Any]) -> dict[str, Any] | Unknown:
    """What the rules grant one recorded account (``matching.account_view``'s answer), or why
    that is unknown. A uid, groups or gids that were not recorded make it unknown: an account
    matched without them would miss the rules that name them (``#uid``, ``%group``, ``%#gid``)."""
    if isinstance(loaded, Unknown):
        return loaded
    name = str(account.get("name"))
    for key in ("uid", "groups", "gids"):
        if isinstance(account.get(key), Unknown):
            return Unknown(f"{name}'s {key}: {account[key].reason}")
    groups = [str(g) for g in account.get("groups") or []]
    gids = [int(g) for g in account.get("gids") or [] if isinstance(g, int)]
    uid = account.get("uid")
    return matching.account_view(loaded, name, set(groups), uid=uid if isinstance(uid, int) else None,
                                 gids=set(gids))
