"""The provider-agent catalog (policies/agents/agents.yaml): how each platform's host agent is
recognised, what it takes on the machine and why, with sources.

Data, not code: the collector reads the names to look for, the AGT-* checks read what an
agent is known to change, and ``hostcheck explain AGENT`` prints it.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from hostcheck.models import IsoDate, Text

CATALOG = Path(__file__).resolve().parent / "policies" / "agents" / "agents.yaml"
MAX_CATALOG_CHARS = 256 << 10


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AgentSource(_Strict):
    title: Text
    url: Text
    checked: IsoDate
    note: Text | None = None


class UpdateChannel(_Strict):
    # True when the channel fetches code from the platform and runs it without the owner's
    # action (as opposed to packages the owner's own apt installs).
    remote_code: bool
    paths: tuple[str, ...] = ()
    text: Text
    source: str


class Take(_Strict):
    what: Text
    why: Text
    source: str


class Agent(_Strict):
    id: str = Field(pattern=r"^[a-z][a-z0-9-]{1,31}$")
    platform: Text
    modelled: Text
    accounts: tuple[str, ...] = ()
    units: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()
    containers: tuple[str, ...] = ()  # image names (last path component, no tag) or container names
    update_channel: UpdateChannel
    # What the agent's installer does to the host's updates: removes unattended-upgrades (and
    # masks the apt timers), or keeps them.
    unattended_upgrades: Literal["removed", "kept"]
    ecc_off: bool
    rewrites_daemon_json: bool
    # Its sources say no other container engine or agent may share the machine.
    exclusive: bool
    # Why another agent on the same machine breaks it (exclusive agents, and those that
    # rewrite the shared Docker daemon's configuration), with its source key.
    conflict: Text | None = None
    conflict_source: str | None = None
    takes: tuple[Take, ...] = Field(min_length=1)


class Catalog(_Strict):
    format: Literal[1]
    sources: dict[str, AgentSource]
    agents: tuple[Agent, ...]

    @model_validator(mode="after")
    def _sources_exist(self) -> Catalog:
        for agent in self.agents:
            keys = [agent.update_channel.source, *(t.source for t in agent.takes),
                    *([agent.conflict_source] if agent.conflict_source else [])]
            if (agent.conflict is None) != (agent.conflict_source is None):
                raise ValueError(f"agent {agent.id}: conflict and conflict_source go together")
            missing = [k for k in keys if k not in self.sources]
            if missing:
                raise ValueError(f"agent {agent.id}: unknown source key(s) {', '.join(missing)}")
        return self

    def get(self, agent_id: str) -> Agent | None:
        return next((a for a in self.agents if a.id == agent_id), None)


@cache
def load_catalog(path: Path = CATALOG) -> Catalog:
    text = path.read_text(encoding="utf-8")[:MAX_CATALOG_CHARS]
    return Catalog.model_validate(yaml.safe_load(text))
