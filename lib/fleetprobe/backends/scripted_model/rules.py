"""The scripted model's rules: which prompt kind a request is, and how its answer is built.

The rules are data (`rules.yaml` beside this module, or any file given with `--rules`): each
rule names a prompt kind, how to recognise it (substrings the system or user message must
contain), and an answer built by one of a few generic, deterministic builders with the
rule's parameters (where in the prompt the inputs are, which word overlap counts as "the
same subject", what JSON to fill in). No builder knows a target: mem0's extraction and
CrewAI's consolidation are two rules over the same builders. Nothing here models language;
an answer is a pure function of the prompt and the rule, so the same prompt always gets the
same answer.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

RULES_FILE = Path(__file__).with_name("rules.yaml")
_WORD = re.compile(r"[a-z0-9][a-z0-9_-]*")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
# words that carry no subject (overlap is measured on the rest)
_STOP = frozenset(
    "a an and are as at be by for from has have in is it its of on or the to was were with "
    "user agent that this".split())


class RuleError(ValueError):
    """A rules file that cannot be used (unknown builder, missing field)."""


@dataclass(frozen=True)
class Rule:
    kind: str
    builder: str
    match_system: tuple[str, ...] = ()
    match_user: tuple[str, ...] = ()
    params: dict[str, Any] = field(default_factory=dict)

    def matches(self, system: str, user: str) -> bool:
        return (all(s in system for s in self.match_system)
                and all(s in user for s in self.match_user))


@dataclass(frozen=True)
class Answer:
    kind: str  # the matched rule's kind, or "unmatched"
    content: str  # the assistant message's text (a JSON document for structured output)
    tool_call: dict[str, Any] | None = None  # {"name": ..., "arguments": {...}}


@dataclass(frozen=True)
class RuleSet:
    rules: tuple[Rule, ...]
    source: str  # the file the rules came from

    def answer(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
               ) -> Answer:
        system = "\n".join(_text(m) for m in messages if m.get("role") == "system")
        user = "\n".join(_text(m) for m in messages if m.get("role") != "system")
        for rule in self.rules:
            if rule.matches(system, user):
                value = BUILDERS[rule.builder](user, rule.params)
                return _shape(rule, value, tools)
        return Answer("unmatched", "{}")


def load(path: Path | None = None) -> RuleSet:
    path = path or RULES_FILE
    data = yaml.safe_load(path.read_text())
    rules = []
    for raw in data.get("rules") or []:
        builder = raw.get("builder")
        if builder not in BUILDERS:
            raise RuleError(f"{path}: rule {raw.get('kind')!r}: unknown builder {builder!r} "
                            f"(known: {', '.join(sorted(BUILDERS))})")
        match = raw.get("match") or {}
        rules.append(Rule(kind=str(raw["kind"]), builder=builder,
                          match_system=tuple(match.get("system") or ()),
                          match_user=tuple(match.get("user") or ()),
                          params=dict(raw.get("params") or {})))
    return RuleSet(tuple(rules), str(path))


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):  # content parts: keep the text ones
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


def _shape(rule: Rule, value: Any, tools: list[dict[str, Any]] | None) -> Answer:
    """As a tool call when the rule names a tool the request offers, else as content."""
    tool = rule.params.get("tool")
    offered = {((t.get("function") or {}).get("name")) for t in tools or ()}
    if tool and tool in offered:
        return Answer(rule.kind, "", {"name": tool, "arguments": value})
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return Answer(rule.kind, text)


# --- what the builders read out of a prompt -------------------------------------------------

def words(text: str) -> frozenset[str]:
    return frozenset(w for w in _WORD.findall(text.lower()) if w not in _STOP)


def overlap(a: str, b: str) -> float:
    """Jaccard overlap of the two texts' content words: the rules' only notion of "the same
    subject" (0 when either has none)."""
    wa, wb = words(a), words(b)
    return len(wa & wb) / len(wa | wb) if wa and wb else 0.0


def section(text: str, start: str, end: str | None) -> str:
    """The text after the regex `start` up to the regex `end` (or the end)."""
    found = re.search(start, text, re.S)
    if not found:
        return ""
    rest = text[found.end():]
    stop = re.search(end, rest, re.S) if end else None
    return rest[:stop.start()] if stop else rest


def json_section(text: str, start: str, end: str | None) -> Any:
    raw = section(text, start, end).strip().strip("`").strip()
    try:
        return json.loads(raw) if raw else None
    except json.JSONDecodeError:
        pass
    try:  # a Python literal (mem0 1.x formats its lists with str())
        return ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        return raw


def facts_of(source: Any, field_name: str | None) -> list[str]:
    """Sentences of the source: a string, or a list of messages / strings / objects."""
    if isinstance(source, list):
        parts = [str(item.get(field_name or "content", "")) if isinstance(item, dict)
                 else str(item) for item in source
                 if not (isinstance(item, dict) and item.get("role") == "system")]
    else:
        parts = [str(source or "")]
    out = []
    for part in parts:
        out += [s.strip() for s in _SENTENCE.split(part.strip()) if s.strip()]
    return out


def fill(template: Any, values: dict[str, Any]) -> Any:
    """`template` with every string "{name}" replaced by values[name] (whole-string
    placeholders keep the value's type, e.g. a list)."""
    if isinstance(template, dict):
        return {k: fill(v, values) for k, v in template.items()}
    if isinstance(template, list):
        return [fill(v, values) for v in template]
    if isinstance(template, str):
        whole = re.fullmatch(r"\{(\w+)\}", template)
        if whole and whole.group(1) in values:
            return values[whole.group(1)]
        return re.sub(r"\{(\w+)\}", lambda m: str(values.get(m.group(1), m.group(0))),
                      template)
    return template


def _records(text: str, params: dict[str, Any]) -> list[dict[str, str]]:
    """Existing memories: a JSON list in a section, or records matched by a regex with named
    groups (`record_pattern`)."""
    where = params.get("existing") or {}
    if "pattern" in where:
        block = section(text, where["start"], where.get("end"))
        return [m.groupdict() for m in re.finditer(where["pattern"], block, re.M)]
    found = json_section(text, where.get("start", r"$^"), where.get("end"))
    return [r for r in found if isinstance(r, dict)] if isinstance(found, list) else []


# --- builders -----------------------------------------------------------------------------

def build_extract(text: str, params: dict[str, Any]) -> Any:
    """Facts = the sentences of the input section; a fact whose overlap with an existing
    memory reaches `skip_at` is left out (the prompt's "do not re-extract"). Each kept fact
    fills `item` ({index}, {fact}, {linked}: ids of existing memories overlapping at
    `link_at`); the list goes under `key`, or is the whole answer when `key` is null."""
    src = params["input"]
    source = (json_section(text, src["start"], src.get("end")) if src.get("json")
              else section(text, src["start"], src.get("end")))
    if isinstance(source, str) and src.get("strip"):  # e.g. mem0's "user: " line prefixes
        source = re.sub(src["strip"], "", source, flags=re.M)
    existing = _records(text, params)
    skip_at, link_at = params.get("skip_at"), params.get("link_at")
    items = []
    for fact in facts_of(source, src.get("field")):
        scores = [(overlap(fact, r.get("text", "")), r) for r in existing]
        if skip_at is not None and any(s >= skip_at for s, _ in scores):
            continue
        linked = [r.get("id") for s, r in scores if link_at is not None and s >= link_at]
        items.append(fill(params.get("item", "{fact}"),
                          {"index": str(len(items)), "fact": fact, "linked": linked}))
    return {params["key"]: items} if params.get("key") else items


def build_decide(text: str, params: dict[str, Any]) -> Any:
    """An update decision: for each new fact, the existing memory it overlaps most; at or
    above `update_at` the fact replaces that memory (`on_match` event, e.g. UPDATE), or
    removes it when the fact matches the regex `delete_when` (`on_delete`, e.g. DELETE: "no
    longer ..."), or leaves it as it is when they overlap at `same_at` (`on_same`, e.g.
    NONE: the fact is already stored), else it is added (`on_new`). Existing memories no
    fact touches are kept (`on_keep`, or left out when it is null). Fills `item` ({id},
    {fact}, {old}, {event})."""
    src = params["input"]
    new = json_section(text, src["start"], src.get("end"))
    facts = [str(f) for f in new] if isinstance(new, list) else facts_of(new, None)
    existing = _records(text, params)
    touched: dict[str, tuple[str, str, str]] = {}
    added = []
    negation = params.get("delete_when")
    for fact in facts:
        best = max(existing, key=lambda r: overlap(fact, r.get("text", "")), default=None)
        score = overlap(fact, best.get("text", "")) if best else 0.0
        if best is not None and score >= params["update_at"] and best["id"] not in touched:
            event = (params["on_delete"] if negation and re.search(negation, fact, re.I)
                     else params["on_same"] if score >= params.get("same_at", 2.0)
                     else params["on_match"])
            touched[str(best["id"])] = (fact, best.get("text", ""), event)
        else:
            added.append(fact)
    items = []
    for r in existing:
        rid = str(r.get("id"))
        if rid in touched:
            fact, old, event = touched[rid]
            items.append(fill(params["item"], {"id": rid, "fact": fact, "old": old,
                                               "event": event}))
        elif params.get("on_keep"):
            items.append(fill(params["item"], {"id": rid, "fact": r.get("text", ""),
                                               "old": r.get("text", ""),
                                               "event": params["on_keep"]}))
    for i, fact in enumerate(added):
        items.append(fill(params["item"], {"id": f"new-{i}", "fact": fact, "old": "",
                                           "event": params["on_new"]}))
    return {params["key"]: items}


def build_choose(text: str, params: dict[str, Any]) -> Any:
    """Pick one of the options listed in the prompt (e.g. existing scopes): the one whose
    words overlap the input most (ties: the first listed); `fallback` when none overlaps.
    Fills `answer` ({choice}, {input})."""
    src = params["input"]
    content = section(text, src["start"], src.get("end")).strip()
    opts = params["options"]
    raw = section(text, opts["start"], opts.get("end")).strip()
    options = re.findall(opts.get("item", r"'([^']*)'"), raw)
    scored = [(overlap(content, o.replace("/", " ")), -i, o) for i, o in enumerate(options)]
    best = max(scored, default=(0.0, 0, params.get("fallback", "")))
    choice = best[2] if best[0] > 0 else params.get("fallback", "")
    return fill(params["answer"], {"choice": choice, "input": content})


def build_consolidate(text: str, params: dict[str, Any]) -> Any:
    """A consolidation plan: every existing record overlapping the new content at
    `merge_at` or more is updated to `merged` ({old}, {new}); the new content is inserted
    only when no record was merged. Fills `action` per merged record ({id}, {merged}) into
    `answer` ({actions}, {insert_new})."""
    src = params["input"]
    new = section(text, src["start"], src.get("end")).strip()
    actions = []
    for r in _records(text, params):
        if overlap(new, r.get("text", "")) >= params["merge_at"]:
            merged = fill(params.get("merged", "{new}"), {"old": r.get("text", ""), "new": new})
            actions.append(fill(params["action"], {"id": r.get("id"), "merged": merged}))
    return fill(params["answer"], {"actions": actions, "insert_new": not actions})


def build_constant(text: str, params: dict[str, Any]) -> Any:
    """The same answer whatever the prompt: `answer` ({prompt}: the user text)."""
    return fill(params["answer"], {"prompt": text})


BUILDERS = {"extract": build_extract, "decide": build_decide, "choose": build_choose,
            "consolidate": build_consolidate, "constant": build_constant}


# --- graph builders (Graphiti's entity and edge extraction; docs/backends.md, Graphiti) -----

def _names_in(text: str, params: dict[str, Any]) -> list[str]:
    """The distinct matches of the regex `pattern` in `text`, in order, less `ignore`
    (case-insensitive whole names, e.g. sentence-initial function words)."""
    ignore = {w.lower() for w in params.get("ignore") or ()}
    out: list[str] = []
    for found in re.finditer(params["pattern"], text):
        words_ = found.group(0).split()
        while words_ and words_[0].lower() in ignore:  # "The Orion" -> "Orion"
            words_ = words_[1:]
        name = " ".join(words_)
        if name and name.lower() not in ignore and name not in out:
            out.append(name)
    return out


def build_names(text: str, params: dict[str, Any]) -> Any:
    """Entities = the distinct matches of `pattern` in the input section (names: capitalised
    words, codes with digits); each fills `item` ({name}, {index}) under `key`."""
    src = params["input"]
    names = _names_in(section(text, src["start"], src.get("end")), params)
    items = [fill(params["item"], {"name": n, "index": i}) for i, n in enumerate(names)]
    return {params["key"]: items}


def build_relate(text: str, params: dict[str, Any]) -> Any:
    """Relations = per sentence of the input section, the first listed entity it names to
    every other one it names (entities: the `entities` section, a JSON list of objects whose
    `field` is the name, or records of its `pattern`); the sentence is the fact. Fills `item`
    ({source}, {target}, {fact}) under `key`."""
    src, ents = params["input"], params["entities"]
    listed = json_section(text, ents["start"], ents.get("end"))
    names = ([str(e.get(ents.get("field", "name"))) for e in listed if isinstance(e, dict)]
             if isinstance(listed, list) else [])
    items = []
    for fact in facts_of(section(text, src["start"], src.get("end")), None):
        named = [n for n in names if n and n in fact]
        for other in named[1:]:
            items.append(fill(params["item"], {"source": named[0], "target": other,
                                               "fact": fact}))
    return {params["key"]: items}


BUILDERS.update({"names": build_names, "relate": build_relate})
