"""read_report: what an agent CLI printed, read as its spec's [output] says."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitswarm.adapters.agentspec import OutputSpec, load_spec
from gitswarm.adapters.report import read_report

SHIPPED = Path(__file__).resolve().parents[2] / "adapters"


def output(text: str) -> OutputSpec:
    """An [output] table from TOML text."""
    return msgspec.toml.decode(text.encode(), type=OutputSpec)


def jsonl(*events: dict) -> bytes:
    return "".join(json.dumps(e) + "\n" for e in events).encode()


CLAUDE_LIKE = output("""
format = "json"
text = "result"
error = "is_error"
error_text = "errors"
denials = "permission_denials"
session = "session_id"
cost_usd = "total_cost_usd"
input_tokens = "usage.input_tokens"
output_tokens = "usage.output_tokens"
model = "model"
structured = "structured_output"
""")


# -- json ------------------------------------------------------------------------------


def test_json_fields_by_dotted_path() -> None:
    doc = {
        "result": "  the answer  ",
        "is_error": False,
        "session_id": "sess-1",
        "total_cost_usd": 0.0123,
        "usage": {"input_tokens": 1200, "output_tokens": 34},
        "model": "m-1",
        "structured_output": {"findings": [], "decisions": []},
        "permission_denials": [],
    }
    report = read_report(CLAUDE_LIKE, json.dumps(doc).encode(), b"")
    assert report.parsed
    assert report.text == "the answer"
    assert report.failed is False and report.reason is None
    assert report.session == "sess-1"
    assert report.cost_usd == pytest.approx(0.0123)
    assert report.input_tokens == 1200 and report.output_tokens == 34
    assert report.model == "m-1"
    assert report.structured == {"findings": [], "decisions": []}
    assert report.denials == []


def test_a_list_index_in_a_dotted_path() -> None:
    spec = output('format = "json"\ntext = "content.-1.text"\nsession = "ids.0"\n')
    doc = {"content": [{"text": "first"}, {"text": "last"}], "ids": ["abc", "def"]}
    report = read_report(spec, json.dumps(doc).encode(), b"")
    assert report.text == "last" and report.session == "abc"


def test_a_missing_path_leaves_the_field_unset() -> None:
    report = read_report(CLAUDE_LIKE, b'{"result": "ok"}', b"")
    assert report.text == "ok"
    assert report.session is None and report.cost_usd is None and report.input_tokens is None
    assert report.failed is False


def test_the_last_json_line_wins_after_a_warning() -> None:
    stdout = (b"Warning: something is deprecated\n"
              + json.dumps({"result": "early", "session_id": "one"}).encode() + b"\n"
              + b"another note\n"
              + json.dumps({"result": "final", "session_id": "two"}).encode() + b"\n")
    report = read_report(CLAUDE_LIKE, stdout, b"")
    assert report.parsed
    assert report.text == "final" and report.session == "two"


def test_json_on_stderr_is_read_when_stdout_has_none() -> None:
    gemini = load_spec(SHIPPED / "gemini.toml").output
    stderr = json.dumps({"error": {"type": "FatalAuthenticationError", "message": "no credentials", "code": 41}}).encode()
    report = read_report(gemini, b"Loaded cached credentials.\n", stderr)
    assert report.parsed
    assert report.failed and report.reason == "no credentials"


def test_stdout_json_is_preferred_over_stderr_json() -> None:
    report = read_report(CLAUDE_LIKE, b'{"result": "from stdout"}', b'{"result": "from stderr"}')
    assert report.text == "from stdout"


def test_parsed_is_false_when_json_was_expected_and_none_came() -> None:
    report = read_report(CLAUDE_LIKE, b"plain words, no json\n", b"some error\n")
    assert report.parsed is False
    assert report.text == "plain words, no json"  # the raw text, for the error message
    assert report.failed is False and report.session is None


def test_parsed_is_false_for_jsonl_without_any_object_line() -> None:
    spec = output('format = "jsonl"\ntext = "text"\n')
    report = read_report(spec, b"[1, 2]\nnot json\n{broken\n", b"")
    assert report.parsed is False


def test_text_content_blocks_are_joined() -> None:
    spec = output('format = "json"\ntext = "content"\n')
    doc = {"content": [{"type": "text", "text": "one"}, {"type": "tool_use"}, {"type": "text", "text": "two"}]}
    assert read_report(spec, json.dumps(doc).encode(), b"").text == "one\ntwo"


# -- jsonl -----------------------------------------------------------------------------


CODEX_EVENTS = jsonl(
    {"type": "thread.started", "thread_id": "thread-9"},
    {"type": "turn.started"},
    {"type": "item.completed", "item": {"type": "reasoning", "text": "thinking..."}},
    {"type": "item.completed", "item": {"type": "agent_message", "text": "first message"}},
    {"type": "turn.completed", "usage": {"input_tokens": 100, "output_tokens": 7}},
    {"type": "item.completed", "item": {"type": "agent_message", "text": "final message"}},
    {"type": "item.completed", "item": {"type": "reasoning", "text": "after thoughts"}},
    {"type": "turn.completed", "usage": {"input_tokens": 250, "output_tokens": 5}},
)


def test_jsonl_where_with_a_dotted_key_takes_the_last_match() -> None:
    codex = load_spec(SHIPPED / "codex.toml").output
    report = read_report(codex, CODEX_EVENTS, b"")
    assert report.parsed
    assert report.text == "final message"  # the last agent_message, not the later reasoning
    assert report.session == "thread-9"
    assert report.input_tokens == 350 and report.output_tokens == 12  # summed over turns
    assert report.failed is False


def test_jsonl_take_first_last_and_sum() -> None:
    events = jsonl({"t": "x", "n": 1, "s": "a"}, {"t": "y", "n": 100, "s": "b"}, {"t": "x", "n": 2, "s": "c"},
                   {"t": "x", "n": 4, "s": "d"})
    for take, expected in (("first", "a"), ("last", "d")):
        spec = output(f'format = "jsonl"\nsession = {{ path = "s", where = {{ t = "x" }}, take = "{take}" }}\n')
        assert read_report(spec, events, b"").session == expected
    spec = output('format = "jsonl"\ninput_tokens = { path = "n", where = { t = "x" }, take = "sum" }\n')
    assert read_report(spec, events, b"").input_tokens == 7
    spec = output('format = "jsonl"\ninput_tokens = { path = "n", take = "sum" }\n')
    assert read_report(spec, events, b"").input_tokens == 107


def test_jsonl_where_matches_booleans_and_integers() -> None:
    events = jsonl({"final": False, "n": 1, "text": "no"}, {"final": True, "n": 2, "text": "yes"},
                   {"final": True, "n": 3, "text": "later"})
    spec = output('format = "jsonl"\ntext = { path = "text", where = { final = true, n = 2 } }\n')
    assert read_report(spec, events, b"").text == "yes"


def test_jsonl_failure_reason() -> None:
    codex = load_spec(SHIPPED / "codex.toml").output
    events = jsonl({"type": "thread.started", "thread_id": "t"},
                   {"type": "turn.failed", "error": {"message": "stream disconnected"}})
    report = read_report(codex, events, b"")
    assert report.failed and report.reason == "stream disconnected"


def test_jsonl_lines_that_are_not_json_are_skipped() -> None:
    spec = output('format = "jsonl"\ntext = { path = "text", where = { kind = "answer" } }\n')
    stdout = b'progress 10%\n{"kind": "answer", "text": "A"}\n{oops\n  {"kind": "answer", "text": "B"}  \n'
    assert read_report(spec, stdout, b"").text == "B"


def test_a_star_path_part_sums_over_models() -> None:
    gemini = load_spec(SHIPPED / "gemini.toml").output
    doc = {
        "response": "done",
        "session_id": "g-1",
        "stats": {"models": {
            "gemini-2.5-pro": {"tokens": {"prompt": 1000, "candidates": 50}},
            "gemini-2.5-flash": {"tokens": {"prompt": 234, "candidates": 6}},
            "odd-model": {"tokens": {}},
        }},
    }
    report = read_report(gemini, json.dumps(doc).encode(), b"")
    assert report.text == "done" and report.session == "g-1"
    assert report.input_tokens == 1234 and report.output_tokens == 56
    assert report.failed is False


def test_a_star_over_a_list_and_at_the_end() -> None:
    spec = output('format = "json"\ninput_tokens = { path = "runs.*.n", take = "sum" }\n'
                  'output_tokens = { path = "counts.*", take = "sum" }\n')
    doc = {"runs": [{"n": 3}, {"n": 4}, {"m": 1}], "counts": {"a": 10, "b": 20}}
    report = read_report(spec, json.dumps(doc).encode(), b"")
    assert report.input_tokens == 7 and report.output_tokens == 30


# -- errors and denials ----------------------------------------------------------------


def test_error_with_a_list_of_strings() -> None:
    doc = {"is_error": True, "subtype": "error_max_turns", "errors": ["hit the turn limit", "stopped"]}
    report = read_report(CLAUDE_LIKE, json.dumps(doc).encode(), b"")
    assert report.failed
    assert report.reason == "hit the turn limit\nstopped"


def test_error_with_a_message_object() -> None:
    gemini = load_spec(SHIPPED / "gemini.toml").output
    spec = output('format = "json"\nerror = "error"\nerror_text = "error"\n')
    doc = {"error": {"type": "ApiError", "message": " quota exceeded ", "code": 429}}
    report = read_report(spec, json.dumps(doc).encode(), b"")
    assert report.failed and report.reason == "quota exceeded"
    report = read_report(gemini, json.dumps(doc).encode(), b"")
    assert report.failed and report.reason == "quota exceeded"


def test_error_true_without_error_text_falls_back_to_the_text() -> None:
    doc = {"is_error": True, "result": "API Error: 500 overloaded"}
    report = read_report(CLAUDE_LIKE, json.dumps(doc).encode(), b"")
    assert report.failed and report.reason == "API Error: 500 overloaded"


def test_error_as_a_string_is_its_own_reason() -> None:
    spec = output('format = "json"\nerror = "error"\ntext = "text"\n')
    report = read_report(spec, b'{"error": "rate limited", "text": "partial"}', b"")
    assert report.failed and report.reason == "rate limited"


@pytest.mark.parametrize("value", [False, None, "", 0, [], {}])
def test_falsy_errors_are_not_failures(value: object) -> None:
    spec = output('format = "json"\nerror = "error"\n')
    report = read_report(spec, json.dumps({"error": value}).encode(), b"")
    assert report.failed is False and report.reason is None


def test_a_non_empty_denials_list_fails_with_the_tool_names() -> None:
    doc = {
        "is_error": False,
        "result": "I could not edit the file.",
        "permission_denials": [
            {"tool_name": "Edit", "tool_use_id": "t1", "tool_input": {}},
            {"tool": "Bash"},
            {"name": "Write"},
            {"other": 1},
            "WebFetch",
        ],
    }
    report = read_report(CLAUDE_LIKE, json.dumps(doc).encode(), b"")
    assert report.failed
    assert report.reason == "permission denied: Edit, Bash, Write, a tool, WebFetch"
    assert len(report.denials) == 5


def test_an_empty_denials_list_is_no_failure() -> None:
    report = read_report(CLAUDE_LIKE, b'{"result": "fine", "permission_denials": []}', b"")
    assert report.failed is False and report.denials == []


# -- text ------------------------------------------------------------------------------


AIDER_OUT = b"""Aider v0.86.2
Main model: gpt-4o with diff edit format
Tokens: 2.5k sent, 10 received. Cost: $0.0010 message, $0.0010 session.
Here is the answer.
Tokens: 3.0k sent, 42 received. Cost: $0.0063 message, $0.0073 session.
"""


def test_text_with_the_shipped_aider_regexes() -> None:
    aider = load_spec(SHIPPED / "aider.toml").output
    report = read_report(aider, AIDER_OUT, b"")
    assert report.parsed
    assert report.text == "Here is the answer."  # the banner and usage lines are dropped (output.drop_lines)
    assert report.input_tokens == 3000  # "3.0k", the last match
    assert report.output_tokens == 42
    assert report.cost_usd == pytest.approx(0.0063)
    assert report.failed is False


@pytest.mark.parametrize(("count", "expected"), [("47k", 47_000), ("3.0k", 3000), ("1,234", 1234), ("2.5M", 2_500_000),
                                                  ("12", 12)])
def test_text_token_counts(count: str, expected: int) -> None:
    spec = output('input_tokens_regex = \'in=(\\S+)\'\n')
    assert read_report(spec, f"done in={count}\n".encode(), b"").input_tokens == expected


def test_text_cost_with_a_thousands_separator_and_the_session() -> None:
    spec = output('cost_regex = \'\\$([0-9.,]+)\'\nsession_regex = \'session: (\\w+)\'\n')
    report = read_report(spec, b"total $1,234.50\n", b"session: abc123\n")  # the session from stderr
    assert report.cost_usd == pytest.approx(1234.5)
    assert report.session == "abc123"


def test_text_regexes_search_stdout_before_stderr() -> None:
    spec = output('output_tokens_regex = \'out=(\\d+)\'\n')
    assert read_report(spec, b"out=5\n", b"out=9\n").output_tokens == 5
    assert read_report(spec, b"nothing\n", b"out=9\n").output_tokens == 9


def test_error_regex_marks_a_zero_exit_run_failed() -> None:
    aider = load_spec(SHIPPED / "aider.toml").output
    stdout = b"Aider v0.86.2\nlitellm.AuthenticationError: invalid api key\nTokens: 1k sent, 0 received.\n"
    report = read_report(aider, stdout, b"")
    assert report.failed
    assert report.reason == "litellm.AuthenticationError: invalid api key"
    assert report.input_tokens == 1000


def test_error_regex_on_stderr_and_its_absence() -> None:
    spec = output("error_regex = '(?m)^ERROR: (.*)$'\n")
    assert read_report(spec, b"all good\n", b"").failed is False
    report = read_report(spec, b"all good\n", b"ERROR: first\nERROR: second  \n")
    assert report.failed and report.reason == "second"


# -- usage file ------------------------------------------------------------------------


def test_usage_file_fields_are_read_from_the_usage_json_not_stdout() -> None:
    hermes = load_spec(SHIPPED / "hermes.toml").output
    stdout = json.dumps({"session_id": "from-stdout", "input_tokens": 1, "estimated_cost_usd": 9.0}).encode()
    usage = json.dumps({"session_id": "from-usage", "input_tokens": 500, "output_tokens": 60,
                        "estimated_cost_usd": 0.25, "model": "hermes-4", "failed": False}).encode()
    report = read_report(hermes, stdout, b"", usage)
    assert report.text == stdout.decode()  # text output: stdout is the answer, as printed
    assert report.session == "from-usage"
    assert report.input_tokens == 500 and report.output_tokens == 60
    assert report.cost_usd == pytest.approx(0.25)
    assert report.model == "hermes-4"
    assert report.failed is False


def test_usage_file_failure_and_its_reason() -> None:
    hermes = load_spec(SHIPPED / "hermes.toml").output
    usage = json.dumps({"failed": True, "failure": "model refused", "input_tokens": 3}).encode()
    report = read_report(hermes, b"partial answer\n", b"", usage)
    assert report.failed and report.reason == "model refused"
    assert report.input_tokens == 3


def test_usage_file_missing_leaves_the_fields_unset() -> None:
    hermes = load_spec(SHIPPED / "hermes.toml").output
    report = read_report(hermes, b"answer\n", b"", None)
    assert report.text == "answer"
    assert report.session is None and report.cost_usd is None and report.failed is False


# -- never raises ----------------------------------------------------------------------


@pytest.mark.parametrize("count", [b"1e999", b"-1e999", b"Infinity", b"NaN", b'"inf"', b'"1e400"', b'"nan"'])
def test_a_count_too_large_or_not_a_number_is_no_count(count: bytes) -> None:
    """A CLI that prints an absurd token count still gets its report read (the count is unknown)."""
    spec = output('format = "json"\ntext = "t"\ninput_tokens = "n"\n')
    report = read_report(spec, b'{"t": "answer", "n": ' + count + b"}", b"")
    assert report.text == "answer"
    assert report.input_tokens is None


def test_an_overflowing_count_in_text_output_is_no_count() -> None:
    aider = load_spec(SHIPPED / "aider.toml").output
    report = read_report(aider, b"Tokens: " + b"9" * 400 + b" sent, 42 received.\n", b"")
    assert report.input_tokens is None and report.output_tokens == 42


SPECS = {
    "text": load_spec(SHIPPED / "aider.toml").output,
    "json": CLAUDE_LIKE,
    "jsonl": load_spec(SHIPPED / "codex.toml").output,
    "usage": load_spec(SHIPPED / "hermes.toml").output,
    "star": load_spec(SHIPPED / "gemini.toml").output,
    "omp": load_spec(SHIPPED / "omp.toml").output,
}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(
        st.sampled_from(["type", "item", "text", "usage", "error", "message", "result", "is_error", "errors",
                         "permission_denials", "stats", "models", "tokens", "prompt", "input_tokens", "failed",
                         "role", "content", "session_id"]) | st.text(max_size=4),
        children, max_size=4),
    max_leaves=12,
)
json_lines = st.lists(json_values, max_size=4).map(lambda docs: "".join(json.dumps(d) + "\n" for d in docs).encode())
# Documents shaped like what the shipped specs read, with any number (or string) where a count goes.
counts = (st.sampled_from([float("inf"), float("nan"), 1e308, "inf", "1e400", "nan", "3.0k", "k", ""])
          | st.floats() | st.integers() | st.text(max_size=6))
shaped = st.one_of(
    counts.map(lambda v: {"usage": {"input_tokens": v, "output_tokens": v}, "total_cost_usd": v, "type": "turn.completed"}),
    counts.map(lambda v: {"stats": {"models": {"m": {"tokens": {"prompt": v, "candidates": v}}}}}),
    counts.map(lambda v: {"input_tokens": v, "output_tokens": v, "estimated_cost_usd": v}),
    counts.map(lambda v: {"type": "message_end", "message": {"role": "assistant", "usage": {"input": v, "output": v}}}),
)
shaped_lines = st.lists(shaped, min_size=1, max_size=3).map(lambda docs: "".join(json.dumps(d) + "\n" for d in docs).encode())
aider_lines = (st.sampled_from(["9" * 400, "3.0k", "1,234", "."]) | st.text(alphabet="0123456789.,km", max_size=400)).map(lambda n: f"Tokens: {n} sent, {n} received.\n".encode())
blobs = (st.binary(max_size=300) | json_lines | shaped_lines | aider_lines
         | st.lists(st.binary(max_size=40) | json_lines | shaped_lines | aider_lines, max_size=4).map(b"".join))


@pytest.mark.parametrize("name", sorted(SPECS))
@settings(max_examples=150, deadline=None)
@given(stdout=blobs, stderr=blobs, usage=st.none() | blobs)
def test_read_report_never_raises(name: str, stdout: bytes, stderr: bytes, usage: bytes | None) -> None:
    report = read_report(SPECS[name], stdout, stderr, usage)
    assert isinstance(report.text, str)
    assert isinstance(report.failed, bool)
    assert report.input_tokens is None or isinstance(report.input_tokens, int)
    assert report.cost_usd is None or isinstance(report.cost_usd, float)
    assert report.failed or report.reason is None
