"""How hostcheck writes counts and numbers, in one place: every renderer (and the few checks and
figures that word their own measurements) says "1 GPU" and "2 GPUs", a share, a duration or an
amount of money the same way. Text for any output format; escaping is the format's.

No imports: the foundation layer, usable from checks to renderers.
"""

from __future__ import annotations

from typing import Any

IRREGULAR = {"is": "are", "was": "were", "has": "have", "does": "do", "accepts": "accept", "this": "these"}
"""Words whose plural is not the word and an s (``plural`` looks here first)."""


def plural(n: int | float, word: str, many: str | None = None) -> str:
    """``word`` as it reads after the number ``n``: itself for exactly 1, else ``many``
    (default: IRREGULAR's, or the word and an s)."""
    if n == 1:
        return word
    return many if many is not None else IRREGULAR.get(word, f"{word}s")


def counted(n: int, word: str, many: str | None = None) -> str:
    """'1 check', '0 checks', '3 processes' (``many="processes"``)."""
    return f"{n} {plural(n, word, many)}"


def plain(number: float, digits: int = 2) -> str:
    """A number to at most ``digits`` decimals, without trailing zeros: 2.50 -> '2.5', 3.0 -> '3'."""
    return f"{number:.{digits}f}".rstrip("0").rstrip(".")


def percent(share: float | None, digits: int = 3) -> str:
    """A share (0-1) as a percentage with ``digits`` decimals ('99.870 %'); None is 'unknown'."""
    return "unknown" if share is None else f"{share * 100:.{digits}f} %"


def duration(seconds: float) -> str:
    """'1h05m', '4m09s'; under ten seconds as they are ('0.25s': a few seconds are not rounded to none)."""
    if 0 < seconds < 10:
        return f"{seconds:.2f}s"
    seconds = round(seconds)
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


def money(x: float | None, currency: str, digits: int = 2) -> str:
    """'1,234.50 USD', '-3.20 EUR'; None (not computable) is 'n/a'."""
    if x is None:
        return "n/a"
    sign = "-" if x < 0 else ""
    return f"{sign}{abs(x):,.{digits}f} {currency}"


def unit_for(count: Any, unit: str) -> str:
    """``unit`` as it reads after ``count``: "1 GPU", "1 port/GPU", "2 GPUs"; units that are no
    plural noun ("ms", "TFLOPS/lane", "%") as they are."""
    word, slash, rest = unit.partition("/")
    if count == 1 and len(word) >= 4 and word.endswith("s") and not word.endswith("ss") and word[-2].isalpha() \
            and not word.isupper():
        return word[:-1] + slash + rest
    return unit
