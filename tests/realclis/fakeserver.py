"""Run one of the realclis fake model servers with its script read from a JSON file at each request.

    python fakeserver.py /tmp/realclis/fake_anthropic.py SCRIPT.json --port-file P --log L [fake's own options]

The fake itself (fake_anthropic.py, fake_openai.py, fake_gemini.py) is loaded
unchanged; only its planning function is wrapped, so one server (one port, one
adapter spec naming it) serves every scenario of a CLI. SCRIPT.json may set:

    target, content, final, structured   replace the fake's options of those names
    write_tool, tool_input               (fake_anthropic) the tool the model calls, and its whole input:
                                         an MCP tool such as mcp__gitswarm__status
    repair_content                       the content written when the request is a repair
                                         round (gitswarm's "... was rejected ... Fix it" prompt)
    analyze_direct                       true: when the request is an analyze task (gitswarm's
                                         "Answer with exactly one JSON object"), answer at once with
                                         `final` (or `structured` where the CLI asks for a schema),
                                         without calling any tool

Everything else is the fake's own script: call the CLI's write tool, then answer.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
import uuid

ANALYZE_MARK = "Answer with exactly one JSON object"  # gitswarm/engine/knowledge/packet.py ANALYZE_ANSWER
REPAIR_MARK = "Fix it in this worktree."  # gitswarm/engine/delegation/repair.py FIX_IT
FIELDS = ("target", "content", "final", "structured", "write_tool", "tool_input")


def main() -> None:
    fake_path, script_path = sys.argv[1], sys.argv[2]
    sys.argv = [fake_path, *sys.argv[3:]]
    spec = importlib.util.spec_from_file_location("realcli_fake", fake_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # parses the fake's own options from sys.argv
    lock = threading.Lock()

    def scripted(original, direct):
        def plan(body):
            try:
                with open(script_path) as f:
                    script = json.load(f)
            except (OSError, ValueError):
                script = {}
            text = json.dumps(body)
            with lock:
                saved = {k: getattr(mod.ARGS, k) for k in FIELDS if hasattr(mod.ARGS, k)}
                for k in saved:
                    if k in script:
                        setattr(mod.ARGS, k, script[k])
                if REPAIR_MARK in text and "repair_content" in script:
                    mod.ARGS.content = script["repair_content"]
                try:
                    if script.get("analyze_direct") and ANALYZE_MARK in text:
                        answer = direct(body, original)
                        if answer is not None:
                            return answer
                    return original(body)
                finally:
                    for k, v in saved.items():
                        setattr(mod.ARGS, k, v)
        return plan

    name = fake_path.rsplit("/", 1)[-1]
    if name.startswith("fake_anthropic"):
        def direct(body, original):
            tools = [t.get("name") for t in body.get("tools") or []]
            if not tools:
                return None  # a side call (title, topic): the fake's own answer
            if "StructuredOutput" in tools and "StructuredOutput" not in mod.tool_uses(body):
                return "tool_use", [{"type": "tool_use", "id": "toolu_" + uuid.uuid4().hex[:20],
                                     "name": "StructuredOutput", "input": json.loads(mod.ARGS.structured)}]
            return "end_turn", [{"type": "text", "text": mod.ARGS.final}]
        mod.plan = scripted(mod.plan, direct)
    elif name.startswith("fake_openai"):
        def direct_responses(body, original):
            fmt = ((body.get("text") or {}).get("format") or {}).get("type")
            final = mod.ARGS.structured if fmt == "json_schema" else mod.ARGS.final
            return [{"type": "message", "role": "assistant", "id": mod.rid("msg_"), "status": "completed",
                     "content": [{"type": "output_text", "text": final, "annotations": []}]}]

        def direct_chat(body, original):
            return {"content": mod.ARGS.final}
        mod.responses_plan = scripted(mod.responses_plan, direct_responses)
        mod.chat_plan = scripted(mod.chat_plan, direct_chat)
    elif name.startswith("fake_gemini"):
        def direct_gemini(body, original):
            if (body.get("generationConfig") or {}).get("responseMimeType") == "application/json":
                return None  # the CLI's side calls (router, next speaker): the fake's own answer
            return [{"text": mod.ARGS.final}]
        mod.plan = scripted(mod.plan, direct_gemini)
    else:
        raise SystemExit(f"fakeserver: unknown fake {name}")
    mod.main()


if __name__ == "__main__":
    main()
