"""The provider-agent catalog (policies/agents/agents.yaml): how each platform's host agent is
recognised, what it takes on the machine and why, with sources.

Data, not code: the collector reads the names to look for, the AGT-* checks read what an
agent is known to change, and ``hostcheck explain AGENT`` prints it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from hostcheck import yaml_loader
from hostcheck.models import SourceEntry, Text

CATALOG = Path(__file__).resolve().parents[1] / "policies" / "agents" / "agents.yaml"
MAX_CATALOG_CHARS = 256 << 10


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


AgentSource = SourceEntry
"""A cited page: the one source format of policies and data files (hostcheck.models.SourceEntry)."""


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


class Engine(_Strict):
    """What the agent runs its workloads on: the host's Docker daemon, a container runtime of
    its own, or virtual machines."""

    kind: Literal["docker", "containerd", "kvm"]
    text: Text
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
    engine: Engine
    # What the platform's own installer or host guide does to the host's automatic updates:
    # removes them (unattended-upgrades purged, the apt-daily timers disabled or their
    # services masked), or keeps them.
    unattended_upgrades: Literal["removed", "kept"]
    unattended_upgrades_source: str | None = None
    ecc_off: bool
    # Its setup rewrites /etc/docker/daemon.json (and restarts Docker): another agent's
    # containers on the same daemon run under settings made for this one.
    rewrites_daemon_json: bool
    # Its sources say it takes the machine's container engine, or its GPUs, for itself: no
    # other agent can work beside it.
    exclusive: bool
    # What an exclusive agent takes, or what its daemon.json rewrite changes, with its source
    # key: the words a conflict with another agent is reported in.
    conflict: Text | None = None
    conflict_source: str | None = None
    takes: tuple[Take, ...] = Field(min_length=1)

    @property
    def container_only(self) -> bool:
        """Recognised only by the images of its running containers (nothing on the host)."""
        return bool(self.containers) and not (self.accounts or self.units or self.paths or self.packages)


@dataclass(frozen=True)
class Conflict:
    """Why two agents cannot share one machine, in words that say which one breaks which."""

    text: str
    source: str  # a source key of the catalog


def conflicts(judged: Agent, installed: Agent) -> list[Conflict]:
    """Why installing ``judged`` on a machine where ``installed`` runs breaks one of them
    (empty when nothing in the sources says so). Both directions count: an exclusive agent
    allows no other beside it, whichever came first; an agent that rewrites daemon.json
    changes the daemon the other's containers run under."""
    out: list[Conflict] = []
    if judged.id == installed.id:
        return out
    for agent in (judged, installed):
        if agent.exclusive and agent.conflict and agent.conflict_source:
            other = installed if agent is judged else judged
            out.append(Conflict(f"{agent.conflict}; {other.platform}'s agent would run beside it", agent.conflict_source))
    if judged.rewrites_daemon_json and installed.engine.kind == "docker" and judged.conflict_source:
        out.append(Conflict(
            f"installing {judged.platform}'s agent here would rewrite /etc/docker/daemon.json, which "
            f"{installed.platform}'s containers run under ({judged.conflict})", judged.conflict_source))
    if installed.rewrites_daemon_json and judged.engine.kind == "docker" and installed.conflict_source:
        out.append(Conflict(
            f"{installed.platform}'s setup has rewritten /etc/docker/daemon.json for its own containers "
            f"({installed.conflict}); {judged.platform}'s containers would run on that same daemon",
            installed.conflict_source))
    return out


class Catalog(_Strict):
    format: Literal[1]
    sources: dict[str, AgentSource]
    agents: tuple[Agent, ...]

    @model_validator(mode="after")
    def _sources_exist(self) -> Catalog:
        for agent in self.agents:
            keys = [agent.update_channel.source, agent.engine.source, *(t.source for t in agent.takes),
                    *([agent.conflict_source] if agent.conflict_source else []),
                    *([agent.unattended_upgrades_source] if agent.unattended_upgrades_source else [])]
            if (agent.conflict is None) != (agent.conflict_source is None):
                raise ValueError(f"agent {agent.id}: conflict and conflict_source go together")
            if (agent.exclusive or agent.rewrites_daemon_json) and agent.conflict is None:
                raise ValueError(f"agent {agent.id}: an exclusive agent, or one that rewrites daemon.json, "
                                 "says what it takes (conflict, conflict_source)")
            if agent.unattended_upgrades == "removed" and agent.unattended_upgrades_source is None:
                raise ValueError(f"agent {agent.id}: unattended_upgrades: removed needs unattended_upgrades_source")
            missing = [k for k in keys if k not in self.sources]
            if missing:
                raise ValueError(f"agent {agent.id}: unknown source key(s) {', '.join(missing)}")
        return self

    def get(self, agent_id: str) -> Agent | None:
        return next((a for a in self.agents if a.id == agent_id), None)


@cache
def load_catalog(path: Path = CATALOG) -> Catalog:
    text = path.read_text(encoding="utf-8")[:MAX_CATALOG_CHARS]
    return Catalog.model_validate(yaml_loader.safe_load(text))
