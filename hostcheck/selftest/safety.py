"""When the self-test refuses to start, and why: it loads a GPU someone owns, so it does not
run beside a renter's or a provider's work, beside another program on the GPU, on battery,
or on a machine whose owner risk is high unless the owner says they accept it. Pure: it
reads the facts the command collected and the GPU's processes the command listed."""

from __future__ import annotations

import re
from typing import Any

from hostcheck.facts import Unknown
from hostcheck.knowledge.agent_catalog import load_catalog
from hostcheck.models import Rating

# Vast's agent names a rental's container "C.<contract id>" (what `docker ps` shows on a host).
VAST_RENTAL_NAME = re.compile(r"^C\.\d+$")


def provider_images() -> set[str]:
    return {image for agent in load_catalog().agents for image in agent.containers}


def rental_containers(facts: dict[str, Any]) -> list[str]:
    """Running containers that are a rental's or a provider agent's, by name or image."""
    docker = facts.get("docker")
    containers = docker.get("containers") if isinstance(docker, dict) else None
    if not isinstance(containers, list):
        return []
    images = provider_images()
    found = []
    for container in containers[:500]:
        if not isinstance(container, dict):
            continue
        name = str(container.get("name") or "")
        image = str(container.get("image") or "")
        repository = image.rsplit("/", 1)[-1].split("@", 1)[0].split(":", 1)[0]
        if VAST_RENTAL_NAME.match(name) or repository in images:
            found.append(f"{name or '?'} ({image or 'image unknown'})")
    return found


def refusals(facts: dict[str, Any], busy: dict[int, list[int]], owner_risk: Rating | None,
             accept_owner_risk: bool) -> list[str]:
    """Every reason not to start, each a sentence for the owner; empty: it may start."""
    reasons = []
    rented = rental_containers(facts)
    if rented:
        reasons.append(f"a rental or provider container is running ({', '.join(rented[:3])}): the self-test would "
                       "take the GPU from it. Stop it, or unlist the machine, first.")
    for gpu, pids in sorted(busy.items()):
        if pids:
            shown = ", ".join(str(p) for p in pids[:5])
            reasons.append(f"GPU {gpu} is in use by another program (process {shown}): its work would be slowed "
                           "and the figures would be wrong. Stop it first.")
    power = facts.get("power")
    on_ac = power.get("on_ac") if isinstance(power, dict) else None
    if on_ac is False:
        reasons.append("the machine runs on battery: full GPU load would drain it, and a laptop on battery caps "
                       "its GPU far under its mains limit. Plug it in first.")
    if owner_risk == Rating.HIGH and not accept_owner_risk:
        reasons.append("the audit rates the owner risk high (`hostcheck audit` says why): the self-test runs only "
                       "with --accept-owner-risk on such a machine.")
    return reasons


def on_battery_unknown(facts: dict[str, Any]) -> bool:
    power = facts.get("power")
    return isinstance(power, dict) and isinstance(power.get("on_ac"), Unknown)
