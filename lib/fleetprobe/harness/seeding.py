"""Seeded plan helpers shared by every experiment.

A plan (fleets, agents, facts, chains) is a pure function of the seed: `rng(seed, label)`
gives an independent, stable stream per purpose, so adding a draw in one part of a plan
cannot shift another. Content is salted at run time with a per-run nonce (`salted`), which
keeps reruns against a stateful live service from colliding with earlier rows, while the
plan itself stays identical for the same seed.
"""

from __future__ import annotations

import hashlib
import random
import secrets
from dataclasses import dataclass


def rng(seed: int, label: str) -> random.Random:
    """A random stream fixed by (seed, label), stable across Python versions and runs."""
    digest = hashlib.sha256(f"{seed}:{label}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def new_nonce() -> str:
    """A short per-run salt (not derived from the seed: it must differ on every run)."""
    return secrets.token_hex(4)


@dataclass(frozen=True)
class Fleet:
    fleet_id: str
    agents: tuple[str, ...]

    @property
    def owner(self) -> str:
        return self.agents[0]


def fleets(n_fleets: int, agents_per_fleet: int) -> tuple[Fleet, ...]:
    """Plan-level names (`fleet-0`, `fleet-0-agent-1`); `scoped` makes them run-unique."""
    return tuple(
        Fleet(f"fleet-{f}", tuple(f"fleet-{f}-agent-{a}" for a in range(agents_per_fleet)))
        for f in range(n_fleets)
    )


def scoped(name: str, nonce: str) -> str:
    """A plan name made unique to one run (fleet and agent ids persist on a live service)."""
    return f"fp{nonce}-{name}"


_SYLLABLES = ("ka", "lo", "mi", "nu", "pe", "ra", "si", "to", "vu", "ze", "bo", "da", "fi",
              "gu", "he", "jo")


def spelled(number: int, digits: int) -> str:
    """A number as letters-only syllables, one per hex digit (no digits: see `salted`)."""
    return "".join(_SYLLABLES[(number >> (4 * k)) & 15] for k in reversed(range(digits)))


def salted(text: str, nonce: str) -> str:
    """Content salted with the run nonce so reruns never hit exact-duplicate rejection.

    The nonce is spelled as syllables, not hex: MemClaw's strong-mode near-duplicate gate skips
    content holding identifier-like tokens (a run of digits and letters reads as a SHA), so a
    hex salt would switch off the very gate the contradiction experiment measures."""
    try:
        word = spelled(int(nonce, 16), len(nonce))
    except ValueError:  # not hex: keep it, it is not identifier-like in the hex sense
        word = nonce
    return f"{text} (run {word})"
