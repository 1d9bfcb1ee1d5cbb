"""What every experiment shares: its params, the run context its phases and checkers get,
the `Experiment` base class and the registry. `fleetprobe.drive.run` runs one by name through the
lifecycle (plan, trace, target, phases, checkers, manifest, summary).

An experiment module supplies only a `Params` model, `make_plan`, `planned_counts`, its
`phases` (async, issue requests, record events) and its `checkers` (read events back from
disk, append judgement events), and registers itself with `@register`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence, Sized
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import httpx
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from tqdm import tqdm

from fleetprobe.client import MemClawClient, Result, RetryPolicy
from fleetprobe.harness.targets import Target, TargetError, TargetParams
from fleetprobe.harness.trace import Trace

log = logging.getLogger("fleetprobe")
T = TypeVar("T")


class ParamsError(ValueError):
    """A params file or override is wrong; the message names the key."""


class TargetUnavailable(TargetError):
    """The target stopped answering mid-run (e.g. the server was killed)."""


class UnexpectedShape(TargetError):
    """A success response that a MemClaw-compatible server would not send."""


def shape_problem(result: Result, expect: tuple[str, ...]) -> str | None:
    """`unexpected body: ...` when a 2xx result lacks an expected JSON field, else None."""
    if not result.ok or not expect:
        return None
    if result.error:
        return result.error  # the client already named it (e.g. not JSON)
    missing = [f for f in expect if not isinstance(result.body, dict) or f not in result.body]
    return f"unexpected body: no {', '.join(missing)!s} field" if missing else None


class ClientParams(BaseModel):
    """The `client:` block: retries, pacing, concurrency."""

    model_config = ConfigDict(extra="forbid")

    max_concurrency: int = Field(8, ge=1)
    max_attempts: int = Field(5, ge=1)
    backoff_base_s: float = Field(0.2, ge=0)
    backoff_max_s: float = Field(5.0, ge=0)
    retry_on_429: bool = True
    timeout_s: float = Field(30.0, gt=0)
    # token-bucket rates per request class, requests/second; null = unthrottled
    writes_per_s: float | None = Field(8.0, gt=0)
    bulk_per_s: float | None = Field(1.5, gt=0)
    searches_per_s: float | None = Field(1.5, gt=0)  # paper: 100 searches/min per tenant
    # consecutive requests that end in a transport error (after retries) before the run aborts
    abort_after_transport_failures: int = Field(3, ge=1)


class ExperimentParams(BaseModel):
    """Fields every experiment's params share; experiments subclass and add theirs."""

    model_config = ConfigDict(extra="forbid")

    experiment: str
    seed: int = 1
    traces_root: str = "data/traces"
    progress: bool = True
    target: TargetParams = TargetParams()
    client: ClientParams = ClientParams()


@dataclass
class RunContext:
    """What phases and checkers get: params, plan, nonce, trace, client, target."""

    params: Any
    plan: Any
    nonce: str
    trace: Trace
    client: MemClawClient
    target: Target
    state: dict[str, Any] = field(default_factory=dict)  # what one phase leaves the next
    _transport_failures: int = field(default=0, repr=False)

    @property
    def tenant(self):  # noqa: ANN201 - Credential, kept loose to avoid an import cycle
        return self.target.tenant

    def record(
        self,
        phase: str,
        result: Result | None = None,
        *,
        expect: tuple[str, ...] = (),
        **fields: Any,
    ) -> dict[str, Any]:
        """Append an event, then abort the run if the target has stopped answering or a
        success response lacks a field in `expect` (not a MemClaw-compatible answer)."""
        self.trace.add_secrets(self.client.known_secrets())
        shape = shape_problem(result, expect) if result is not None else None
        if shape:
            result = dataclasses.replace(result, error=shape)
        event = self.trace.event(phase, result, **fields)
        if shape:
            raise UnexpectedShape(f"{result.op} answered {result.status}: {shape}; "
                                  "is this a MemClaw-compatible endpoint?")
        if result is not None:
            self._note_transport(result)
        return event

    def _note_transport(self, result: Result) -> None:
        if result.status is not None:
            self._transport_failures = 0
            return
        self._transport_failures += 1
        if self._transport_failures >= self.params.client.abort_after_transport_failures:
            raise TargetUnavailable(
                f"{self.target.base_url} stopped answering mid-run "
                f"({self._transport_failures} requests in a row ended in {result.error})"
            )

    def events(self, phase: str | None = None) -> list[dict[str, Any]]:
        return self.trace.read_events(phase)

    def progress(self, items: Iterable[T], desc: str, total: int | None = None) -> Iterable[T]:
        return self._bar(items, desc=desc, total=total)

    def _bar(self, items: Iterable[T] | None = None, **kwargs: Any) -> Any:
        """A progress bar on stderr where stderr is a terminal; elsewhere (a notebook kernel,
        a CI log) one line when the phase ends, so an executed notebook keeps a line per
        phase instead of redraws."""
        if self.params.progress and not sys.stderr.isatty():
            return FinalLine(items, **kwargs)
        return tqdm(items, disable=not self.params.progress, file=sys.stderr, leave=False,
                    mininterval=0.1, **kwargs)

    async def gather(self, coros: Sequence[Awaitable[T]], desc: str) -> list[T]:
        """Run coroutines concurrently (the client caps in-flight requests); the first
        failure cancels the rest, so a lost target stops the phase at once."""
        bar = self._bar(total=len(coros), desc=desc)

        async def tracked(coro: Awaitable[T]) -> T:
            try:
                return await coro
            finally:
                bar.update()

        try:
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(tracked(c)) for c in coros]
        except BaseExceptionGroup as group:
            raise first_failure(group) from group
        finally:
            bar.close()
        return [task.result() for task in tasks]


class FinalLine:
    """The part of tqdm's interface the phases use, printing `desc: n/total in S s` once."""

    def __init__(self, items: Iterable[Any] | None = None, desc: str = "",
                 total: int | None = None) -> None:
        self.items, self.desc, self.n = items, desc, 0
        self.total = total if total is not None else (
            len(items) if isinstance(items, Sized) else None)
        self.started = time.monotonic()
        self.closed = False

    def __iter__(self) -> Iterator[Any]:
        try:
            for item in self.items or ():
                yield item
                self.n += 1
        finally:
            self.close()

    def update(self, n: int = 1) -> None:
        self.n += n

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        of = f"/{self.total}" if self.total is not None else ""
        print(f"{self.desc}: {self.n}{of} in {time.monotonic() - self.started:.1f} s",
              file=sys.stderr, flush=True)


Phase = Callable[[RunContext], Awaitable[None]]
Checker = Callable[[RunContext], None]


class Experiment:
    """Base class: subclass, set `name` and `Params`, implement the four hooks."""

    name: ClassVar[str]
    Params: ClassVar[type[ExperimentParams]] = ExperimentParams

    def make_plan(self, params: Any) -> Any:
        raise NotImplementedError

    def planned_counts(self, plan: Any, params: Any) -> dict[str, int]:
        """Planned events per EVENTS.md phase (the manifest's `planned`)."""
        raise NotImplementedError

    def phases(self) -> list[Phase]:
        raise NotImplementedError

    def checkers(self) -> list[Checker]:
        raise NotImplementedError

    def client_params(self, params: Any) -> ClientParams:
        """Hook for experiments whose params override client settings (e.g. pacing)."""
        return params.client


EXPERIMENTS: dict[str, type[Experiment]] = {}
E = TypeVar("E", bound=type[Experiment])


def register(cls: E) -> E:
    EXPERIMENTS[cls.name] = cls
    return cls


def parse_params(experiment: Experiment, raw: dict[str, Any]) -> ExperimentParams:
    raw = {"experiment": experiment.name, **raw}
    if raw["experiment"] != experiment.name:
        raise ParamsError(
            f"params are for experiment {raw['experiment']!r}, not {experiment.name!r}"
        )
    try:
        return experiment.Params.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        raise ParamsError(f"invalid params for {experiment.name}: {problems}") from exc


def make_client(base_url: str, cp: ClientParams,
                transport: httpx.AsyncBaseTransport | None = None) -> MemClawClient:
    """`transport`: e.g. the faults experiment's fault-injecting wrapper."""
    return MemClawClient(
        base_url,
        retry=RetryPolicy(cp.max_attempts, cp.backoff_base_s, cp.backoff_max_s, cp.retry_on_429),
        pacing={"write": cp.writes_per_s, "bulk": cp.bulk_per_s, "search": cp.searches_per_s},
        max_concurrency=cp.max_concurrency,
        timeout_s=cp.timeout_s,
        transport=transport,
    )


def first_failure(exc: BaseException) -> BaseException:
    """The first real failure inside (nested) exception groups, skipping cancellations."""
    while isinstance(exc, BaseExceptionGroup):
        inner = [e for e in exc.exceptions if not isinstance(e, asyncio.CancelledError)]
        exc = inner[0] if inner else exc.exceptions[0]
    return exc


def describe_failure(exc: BaseException) -> str:
    """A one-line reason for `incomplete_reason`."""
    exc = first_failure(exc)
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted: KeyboardInterrupt (Ctrl-C)"
    if isinstance(exc, asyncio.CancelledError):
        return "interrupted: the run was cancelled (Ctrl-C or task cancellation)"
    if isinstance(exc, TargetError):
        return f"target: {exc}"
    return f"{type(exc).__name__}: {exc}"


def load_params(path: str | Path, overrides: Sequence[str] = ()) -> dict[str, Any]:
    """A params YAML file plus `key.sub=value` overrides (values parsed as YAML)."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise ParamsError(f"cannot read params file {path}: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise ParamsError(f"params file {path} is not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise ParamsError(f"params file {path} must hold a mapping, not {type(raw).__name__}")
    for item in overrides:
        apply_override(raw, item)
    return raw


def apply_override(params: dict[str, Any], item: str) -> None:
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise ParamsError(f"override {item!r} must look like key=value (e.g. seed=7)")
    *parents, leaf = key.strip().split(".")
    node = params
    for part in parents:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ParamsError(f"override {item!r}: {part!r} is not a mapping")
        node = child
    node[leaf] = yaml.safe_load(value)
