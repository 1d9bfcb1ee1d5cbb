"""Sweeps in the plan language: `seeds` and `sweep` expand one plan entry into many runs.

    runs:
      - experiment: provenance
        profiles: [memclaw-2026-05-30, proposed]
        seeds: 1..5                      # or [1, 2, 3], or {start: 1, count: 5}
        sweep:                           # any param, dotted for nesting; the product of all
          target.engine_src: [../shared/engines/caura-e2d805e.tar.gz, ...]
          chains: [10, 50]
    seeds: [1, 2, 3]                     # plan-wide defaults for entries that set none
    sweep: {...}

Every (profile, seed, swept value...) is one run; `seeds` is the sweep of `seed`. Each swept
assignment becomes a `key=value` override and a part of the run's stable name
(`provenance-proposed-seed3-chains50`), so resuming a sweep matches runs by name and a run
keeps its name when values are added to the sweep. Pure: imports nothing of the kit, so a
plan's expansion can be tested without a server.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Mapping
from typing import Any

import yaml

Assignment = tuple[tuple[str, str], ...]  # ((param key, value as override text), ...)

# a value that is already a readable file-name part is used as it is; anything else
# (a path, a list) gets a readable prefix and a hash, so two values never share a name
_PLAIN = re.compile(r"[A-Za-z0-9._+-]{1,32}")
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")
_NUMBER = re.compile(r"-?\d+(\.\d+)?")
_RANGE = re.compile(r"\s*(-?\d+)\s*\.\.\s*(-?\d+)\s*")
MAX_RUNS_PER_ENTRY = 10_000  # a typo like 1..1000000 fails loudly, not after hours


class SweepError(ValueError):
    """A `seeds` or `sweep` value the plan language does not accept."""


def seeds_of(value: Any) -> list[int]:
    """`[1, 2, 3]`, `"1..20"` (both ends included) or `{start: 1, count: 20}`."""
    if isinstance(value, bool):
        raise SweepError(f"seeds: expected a list, 'A..B' or {{start, count}}, not {value!r}")
    if isinstance(value, int):
        seeds = [value]
    elif isinstance(value, str) and (match := _RANGE.fullmatch(value)):
        first, last = int(match[1]), int(match[2])
        if last < first:
            raise SweepError(f"seeds: {value!r} is an empty range")
        seeds = list(range(first, last + 1))
    elif isinstance(value, Mapping) and set(value) == {"start", "count"}:
        start, count = value["start"], value["count"]
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, count)) \
                or count < 1:
            raise SweepError(f"seeds: start and count must be integers, count >= 1: {value!r}")
        seeds = list(range(start, start + count))
    elif isinstance(value, list) and value and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value):
        seeds = list(value)
    else:
        raise SweepError(f"seeds: expected a non-empty list of integers, 'A..B' or "
                         f"{{start: A, count: N}}, not {value!r}")
    if len(set(seeds)) != len(seeds):
        raise SweepError(f"seeds: {value!r} lists a seed twice")
    return seeds


def override_text(value: Any) -> str:
    """The value as `--set` text that reads back (as YAML) to the same value."""
    if isinstance(value, str):
        try:
            if yaml.safe_load(value) == value:
                return value
        except yaml.YAMLError:
            pass
    return json.dumps(value)  # JSON is YAML: quoted strings, lists, numbers, null


def axes(seeds: Any, sweep: Any) -> list[tuple[str, list[str]]]:
    """The swept keys in order (seed first), each with its values as override text."""
    result: list[tuple[str, list[str]]] = []
    if seeds is not None:
        result.append(("seed", [str(s) for s in seeds_of(seeds)]))
    if sweep is None:
        return result
    if not isinstance(sweep, Mapping) or not sweep:
        raise SweepError(f"sweep: expected a mapping of param -> [values], not {sweep!r}")
    for key, values in sweep.items():
        if not isinstance(key, str) or not key.strip() or "=" in key:
            raise SweepError(f"sweep: {key!r} is not a param key (e.g. chains, target.profile)")
        if key == "seed" and seeds is not None:
            raise SweepError("sweep: seed is swept by `seeds` already; name it once")
        if not isinstance(values, list) or not values:
            raise SweepError(f"sweep: {key} needs a non-empty list of values, not {values!r}")
        texts = [override_text(v) for v in values]
        if len(set(texts)) != len(texts):
            raise SweepError(f"sweep: {key} lists a value twice")
        result.append((key.strip(), texts))
    return result


def expand(seeds: Any = None, sweep: Any = None) -> list[Assignment]:
    """Every combination of the swept values, in the order written; [()] when nothing is
    swept (one run, as before sweeps)."""
    named = axes(seeds, sweep)
    combos = [tuple(zip([k for k, _ in named], values, strict=True))
              for values in itertools.product(*(v for _, v in named))]
    if len(combos) > MAX_RUNS_PER_ENTRY:
        raise SweepError(f"sweep: {len(combos)} runs from one entry (over "
                         f"{MAX_RUNS_PER_ENTRY}); split it or check the ranges")
    return combos


def name_part(key: str, text: str) -> str:
    """`seed3`, `chains50`, `profile_naive`, `engine_src_caura-e2d805e.tar.gz-1a2b3c`: the
    last part of the key and the value (a readable prefix of it and a hash when it is not
    file-name safe). Never `=`: DuckDB reads a `k=v` part of a trace's path as a hive
    partition, an extra column in the run's events."""
    leaf = key.rsplit(".", 1)[-1]
    if _NUMBER.fullmatch(text):
        return f"{leaf}{text}"
    if _PLAIN.fullmatch(text):
        return f"{leaf}_{text}"
    readable = _UNSAFE.sub("_", text.rstrip("/").rsplit("/", 1)[-1]).strip("_")[:24]
    digest = hashlib.sha1(text.encode()).hexdigest()[:6]
    return f"{leaf}_{readable}-{digest}" if readable else f"{leaf}_{digest}"


def run_suffix(assignment: Assignment) -> str:
    return "-".join(name_part(k, v) for k, v in assignment)


def overrides(assignment: Assignment) -> tuple[str, ...]:
    return tuple(f"{k}={v}" for k, v in assignment)
