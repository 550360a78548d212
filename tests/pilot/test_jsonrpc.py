"""The JSON-RPC transport alone (pilot/jsonrpc.py), on byte streams: what it passes on and what it answers itself."""

from __future__ import annotations

import io
import json

from gitswarm.pilot.jsonrpc import INVALID_REQUEST, PARSE_ERROR, Incoming, Peer


def exchange(data: bytes, max_line: int = 1024) -> tuple[list[Incoming], list[dict]]:
    out = io.BytesIO()
    peer = Peer(io.BytesIO(data), out, max_line)
    passed = list(peer.messages())
    return passed, [json.loads(line) for line in out.getvalue().splitlines()]


def test_requests_and_notifications_pass_and_responses_are_ignored() -> None:
    passed, answered = exchange(
        b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'
        b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
        b'\n'
        b'{"jsonrpc":"2.0","id":"a","method":"tools/list","params":{"cursor":"x"}}\n'
        b'{"jsonrpc":"2.0","id":9,"result":{}}\n'
    )
    assert passed == [Incoming("ping", {}, 1), Incoming("notifications/initialized", {}), Incoming("tools/list", {"cursor": "x"}, "a")]
    assert answered == []


def test_malformed_messages_are_answered_with_id_null_unless_it_is_valid_and_reading_goes_on() -> None:
    lines = [b"{not json", b"[1]", b'{"jsonrpc":"1.0","id":1,"method":"x"}', b'{"jsonrpc":"2.0","id":1.5,"method":"x"}',
             b'{"jsonrpc":"2.0","id":true,"method":"x"}', b'{"jsonrpc":"2.0","id":[1],"method":"x"}',
             b'{"jsonrpc":"2.0","id":null,"method":"x"}', b'{"jsonrpc":"2.0","id":5}',
             b'{"jsonrpc":"2.0","id":6,"method":"x","params":[1]}', b'{"jsonrpc":"2.0","id":7,"method":"ok"}']
    passed, answered = exchange(b"\n".join(lines) + b"\n")
    assert passed == [Incoming("ok", {}, 7)]
    assert [a["error"]["code"] for a in answered] == [PARSE_ERROR] + [INVALID_REQUEST] * 8
    assert [a["id"] for a in answered] == [None] * 7 + [5, 6]  # a valid id is answered as such


def test_a_line_past_the_limit_is_refused_whole_and_the_next_is_read() -> None:
    huge = b'{"jsonrpc":"2.0","id":1,"method":"' + b"x" * 5000 + b'"}\n'
    passed, answered = exchange(huge + b'{"jsonrpc":"2.0","id":2,"method":"ping"}\n', max_line=1024)
    assert passed == [Incoming("ping", {}, 2)]
    assert len(answered) == 1 and answered[0]["error"]["code"] == INVALID_REQUEST and "1024 bytes" in answered[0]["error"]["message"]


def test_an_unterminated_last_line_is_still_a_message_and_a_gone_client_is_no_error() -> None:
    passed, _ = exchange(b'{"jsonrpc":"2.0","id":1,"method":"ping"}')
    assert passed == [Incoming("ping", {}, 1)]
    closed = io.BytesIO()
    peer = Peer(io.BytesIO(b""), closed)
    closed.close()
    peer.respond(1, {})  # the client went away: dropped, said by `closed`
    assert peer.closed
