"""Output formats: one module per format in this package, each registering itself.

A format is a :class:`Format`: its name (the value of every command's ``--format``), a line of
help, and a renderer for each kind of report it renders (:class:`~hostcheck.render.views.Kind`),
each a function of the report's model and the :class:`Options`. A command builds its model and
calls :func:`render`; it never picks a format itself. ``--format``'s choices are the registered
names (:func:`names`), so a new format is one new module here that calls :func:`register`, and
nothing else. A format that has no renderer for a kind declines it: ``--format`` refuses it for
that command (:func:`declined`), and :func:`render` raises
:class:`~hostcheck.errors.FormatDeclined`, naming the formats that render it.

Format modules import their renderers inside the renderer functions, so loading the registry
(which every command does for its ``--format`` option) stays cheap.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hostcheck.errors import FormatDeclined, UsageError
from hostcheck.render.views import Kind

__all__ = ["DEFAULT", "Format", "Kind", "Options", "declined", "formats", "names", "register", "render"]

DEFAULT = "table"
"""The format a command prints in when ``--format`` is not given."""


@dataclass(frozen=True)
class Options:
    """What a command asks of the rendering, whatever the format; a format ignores what it has no use for."""

    details: bool = False
    """``--details``: after the first screen, everything (the audit's every finding once)."""
    color: bool = False
    """Colour is wanted (stdout is a terminal); only a format made for a terminal uses it."""
    command: str = ""
    """The command line as given (``--redact``: without file names), for a format whose report
    has a header that says how it was made (HTML's); "" when not known."""


Renderer = Callable[[Any, Options], str]


@dataclass(frozen=True)
class Format:
    name: str
    """The ``--format`` value."""
    help: str
    """What it is for, in a few words (``--format``'s help lists them)."""
    order: int
    """Its place among the choices (the default format first)."""
    renderers: Mapping[Kind, Renderer] = field(default_factory=dict)
    """One function per kind of report it renders: model and options in, the whole text out."""
    terminal: bool = False
    """Made to be read in a terminal: commands show progress and colour only with such a format."""

    def renders(self, kind: Kind) -> bool:
        return kind in self.renderers

    def render(self, kind: Kind, model: Any, options: Options | None = None) -> str:
        renderer = self.renderers.get(kind)
        if renderer is None:
            raise FormatDeclined(declined(self.name, kind))
        return renderer(model, options or Options())


_REGISTRY: dict[str, Format] = {}
_LOADED = False


def register(fmt: Format) -> Format:
    """Add ``fmt`` to the registry (a format module calls this once, at import)."""
    if fmt.name in _REGISTRY and _REGISTRY[fmt.name] is not fmt:
        raise ValueError(f"two output formats are named {fmt.name!r}")
    _REGISTRY[fmt.name] = fmt
    return fmt


def formats() -> dict[str, Format]:
    """Every registered format by name, in their ``order``: each module of this package is
    imported once, on the first call."""
    global _LOADED
    if not _LOADED:
        for module in pkgutil.iter_modules(__path__):
            importlib.import_module(f"{__name__}.{module.name}")
        _LOADED = True
    return dict(sorted(_REGISTRY.items(), key=lambda item: (item[1].order, item[0])))


def names(kind: Kind | None = None) -> list[str]:
    """The formats' names (those that render ``kind``, when given), default first."""
    return [name for name, fmt in formats().items() if kind is None or fmt.renders(kind)]


def declined(name: str, kind: Kind) -> str:
    """Why ``name`` cannot print ``kind``: one line naming the formats that can."""
    return f"the {name} format does not render the {kind}; use {' or '.join(names(kind))}"


def get(name: str) -> Format:
    known = formats()
    if name not in known:
        raise UsageError(f"--format {name}: no such format; the formats are {', '.join(known)}")
    return known[name]


def render(kind: Kind, model: Any, fmt: str = DEFAULT, options: Options | None = None) -> str:
    """``model`` (a report of ``kind``) in the format named ``fmt``."""
    return get(fmt).render(kind, model, options)
