"""The shared terminal layout: width from the environment, words wrapped, never cut or padded."""

from __future__ import annotations

import pytest

from hostcheck.render.terminal import DEFAULT_WIDTH, MAX_WIDTH, MIN_WIDTH, terminal_width, wrap


@pytest.mark.parametrize(("columns", "expected"), [("120", 120), ("80", 80), ("10", MIN_WIDTH), ("999", MAX_WIDTH)])
def test_width_follows_columns_within_bounds(monkeypatch: pytest.MonkeyPatch, columns: str, expected: int) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    assert terminal_width() == expected


def test_width_is_80_when_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    # pytest captures stdout: not a terminal, so the fallback applies
    assert terminal_width() == DEFAULT_WIDTH


def test_wrap_keeps_words_whole_and_strips_trailing_space() -> None:
    text = "password login must be off — it is on (PasswordAuthentication yes, effective config) "
    lines = wrap(text, 30, first="RISK  ", indent="      ")
    assert all(len(line) <= 30 and line == line.rstrip() for line in lines)
    assert " ".join(line.strip() for line in lines).replace("RISK ", "RISK", 1).split() == ["RISK", *text.split()]


def test_a_word_longer_than_the_line_is_broken_not_overflowing() -> None:
    lines = wrap("x" * 200, 50, indent="  ")
    assert all(len(line) <= 50 for line in lines)
    assert "".join(line.strip() for line in lines) == "x" * 200


def test_empty_text_is_the_prefix_alone() -> None:
    assert wrap("", 80, first="fix: ") == ["fix:"]


def test_a_cited_address_longer_than_the_line_stays_whole_on_its_own_line() -> None:
    url = "<https://web.archive.org/web/20261129000000/https://docs.io.net/docs/device-onboarding>"
    lines = wrap(f"source: io.net docs {url} (2026-11-29)", 60, indent="  ", whole_urls=True)
    assert f"  {url}" in lines or url in lines
    assert all(len(line) <= 60 for line in lines if url not in line)
    # without the flag (text from facts) the width holds whatever the word
    assert all(len(line) <= 60 for line in wrap(f"host {url}", 60, indent="  "))
