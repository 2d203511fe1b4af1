"""Counts as a reader says them: "1 GPU", "2 GPUs", "1 more step", never "1 GPU(s)"."""

from __future__ import annotations

from typing import Any


def unit_for(count: Any, unit: str) -> str:
    """``unit`` as it reads after ``count``: "1 GPU", "1 port/GPU", "2 GPUs"; units that are no
    plural noun ("ms", "TFLOPS/lane", "%") as they are."""
    word, slash, rest = unit.partition("/")
    if count == 1 and len(word) >= 4 and word.endswith("s") and not word.endswith("ss") and word[-2].isalpha() \
            and not word.isupper():
        return word[:-1] + slash + rest
    return unit


def plural(count: int, word: str, words: str | None = None) -> str:
    """"1 step", "3 steps" ("1 GPU", "2 GPUs"); ``words`` for a plural that is not ``word`` + s."""
    return f"{count} {word if count == 1 else (words or word + 's')}"
