"""Read what an agent CLI printed, as its spec's `[output]` describes: answer, error, cost, tokens."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from gitswarm.adapters.agentspec import Field, OutputSpec, Selector
from gitswarm.model.verdict import last_json_object

_SUFFIX = {"k": 1_000, "m": 1_000_000}


@dataclass
class AgentReport:
    """What one run of an agent said about itself."""

    text: str = ""
    failed: bool = False
    reason: str | None = None
    session: str | None = None
    cost_usd: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    model: str | None = None
    structured: Any = None
    denials: list[Any] = field(default_factory=list)
    parsed: bool = True  # False when JSON output was expected and none was found
    provider_error: str | None = None  # what matched the spec's provider_error_regex (read for a failed run)


def read_report(spec: OutputSpec, stdout: bytes, stderr: bytes, usage: bytes | None = None) -> AgentReport:
    out = stdout.decode(errors="replace")
    err = stderr.decode(errors="replace")
    if spec.format == "text":
        report = AgentReport(text=_drop(out, spec.drop_lines).strip())
        docs: list[Any] = []
    else:
        # Some CLIs print their error object on stderr (gemini does, for fatal errors).
        docs = _documents(out, spec.format) or _documents(err, spec.format)
        report = AgentReport(parsed=bool(docs))
        text = _select(docs, spec.text) if spec.text is not None else None
        report.text = _as_text(text) if text is not None else ("" if docs else out.strip())
    usage_docs = _documents(usage.decode(errors="replace"), "json") if usage else []
    source = usage_docs if spec.usage_file else docs
    report.session = _str(_select(source, spec.session))
    report.cost_usd = _float(_select(source, spec.cost_usd))
    report.input_tokens = _int(_select(source, spec.input_tokens))
    report.output_tokens = _int(_select(source, spec.output_tokens))
    report.model = _str(_select(source, spec.model))
    report.structured = _select(docs, spec.structured)
    denials = _select(docs, spec.denials)
    ignored = set(spec.ignored_denials)
    report.denials = [d for d in denials if _denied(d) not in ignored] if isinstance(denials, list) else []
    error = _select(source, spec.error)
    if error not in (None, False, "", 0, [], {}):
        report.failed = True
        said = _select(source, spec.error_text)
        report.reason = _as_text(said) if said not in (None, "") else (_as_text(error) if error is not True else report.text)
    if report.denials:
        report.failed = True
        report.reason = "permission denied: " + ", ".join(_denied(d) for d in report.denials)
    if spec.error_regex is not None and not report.failed:
        said = re.findall(spec.error_regex, out) or re.findall(spec.error_regex, err)
        if said:
            report.failed, report.reason = True, said[-1].strip()
    if spec.provider_error_regex is not None:
        said = re.findall(spec.provider_error_regex, out) or re.findall(spec.provider_error_regex, err)
        # one line, JSON's escaped quotes unescaped (the match may lie inside a JSON string), bounded
        report.provider_error = " ".join(said[-1].replace('\\"', '"').split())[:500] if said else None
    for name, pattern in (("cost_usd", spec.cost_regex), ("input_tokens", spec.input_tokens_regex),
                          ("output_tokens", spec.output_tokens_regex), ("session", spec.session_regex),
                          ("model", spec.model_regex)):
        if pattern is None or getattr(report, name) is not None:
            continue
        found = re.findall(pattern, out) or re.findall(pattern, err)
        if found:
            value = found[-1]
            setattr(report, name, _float(value) if name == "cost_usd" else _int(value) if "tokens" in name else _str(value))
    if report.cost_usd is not None and report.cost_usd < 0:
        report.cost_usd = None  # not a cost
    return report


def _drop(text: str, patterns: list[str]) -> str:
    if not patterns:
        return text
    compiled = [re.compile(p) for p in patterns]
    return "\n".join(line for line in text.splitlines() if not any(c.search(line) for c in compiled))


def _documents(text: str, kind: str) -> list[Any]:
    """The JSON document (json), or every JSON object line (jsonl); lines that are not JSON are skipped."""
    if kind == "json":
        stripped = text.strip()
        try:
            return [json.loads(stripped)] if stripped else []
        except ValueError:
            # A CLI may print a notice before its JSON (gemini: "Loaded cached
            # credentials." before a pretty-printed error): take the last object.
            found = last_json_object(stripped)
            return [found] if found is not None else []
    docs = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                docs.append(json.loads(line))
            except ValueError:
                continue
    return docs[-1:] if kind == "json" else docs


def _select(docs: list[Any], where: Field | None) -> Any:
    if where is None or not docs:
        return None
    selector = Selector(path=where) if isinstance(where, str) else where
    matching = [d for d in docs if all(_get(d, k) == v for k, v in selector.where.items())]
    found = [(k, v) for d in matching for k, v in _values(d, selector.path, None) if v is not None]
    if not found:
        return None
    if selector.take in ("sum", "max"):
        found = [(k, v) for k, v in found if isinstance(v, int | float) and not isinstance(v, bool)]
        if not found:
            return None
        if selector.take == "sum":
            return sum(v for _, v in found)
        chosen = max(found, key=lambda pair: pair[1])
    else:
        chosen = found[0] if selector.take == "first" else found[-1]
    return chosen[0] if selector.key else chosen[1]


def _values(doc: Any, path: str, key: Any) -> list[tuple[Any, Any]]:
    """The values at a dotted path, each with the key it was found under at the last `*`;
    a `*` part stands for every value of an object or list (gemini keys its token counts by
    model name)."""
    head, star, rest = path.partition("*")
    if not star:
        return [(key, _get(doc, path))]
    found = _get(doc, head.rstrip(".")) if head else doc
    children = found.items() if isinstance(found, dict) else enumerate(found) if isinstance(found, list) else []
    rest = rest.lstrip(".")
    return [pair for name, child in children for pair in (_values(child, rest, name) if rest else [(name, child)])]


def _get(doc: Any, path: str) -> Any:
    for part in path.split("."):
        if isinstance(doc, dict):
            doc = doc.get(part)
        elif isinstance(doc, list) and re.fullmatch(r"-?\d+", part):
            index = int(part)
            doc = doc[index] if -len(doc) <= index < len(doc) else None
        else:
            return None
    return doc


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, dict) and isinstance(message := value.get("message"), str):
        return message.strip()
    if isinstance(value, list):  # content blocks: [{"type": "text", "text": ...}]
        parts = [v.get("text", "") if isinstance(v, dict) else str(v) for v in value]
        return "\n".join(p for p in parts if p).strip()
    return json.dumps(value, sort_keys=True)


def _denied(item: Any) -> str:
    """What was refused: a tool's name (claude's permission_denials), else a path (codex's refused changes)."""
    if isinstance(item, dict):
        return str(item.get("tool_name") or item.get("tool") or item.get("name") or item.get("path") or "a tool")
    return str(item)


def _str(value: Any) -> str | None:
    return None if value is None or isinstance(value, dict | list) else str(value)


def _float(value: Any) -> float | None:
    try:
        number = None if value is None or isinstance(value, bool) else float(str(value).replace(",", ""))
    except (ValueError, OverflowError):
        return None
    return number if number is None or math.isfinite(number) else None


def _int(value: Any) -> int | None:
    """A token count: 1234, "1,234", "2.3k", "1.1M"."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) else None
    text = str(value).strip().lower().replace(",", "")
    multiplier = _SUFFIX.get(text[-1:], 1)
    try:
        number = float(text.rstrip("km")) * multiplier
    except (ValueError, OverflowError):
        return None
    return round(number) if math.isfinite(number) else None
