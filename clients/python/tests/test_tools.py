"""sbx.tools: the run_python tool definitions and handle()."""

from __future__ import annotations

import base64
import json
import types

import pytest

import sbx
import sbx.tools as tools

from conftest import PNG_MAGIC, Server


def test_definitions() -> None:
    o = tools.openai()
    assert o["type"] == "function" and o["function"]["name"] == "run_python"
    assert o["function"]["parameters"]["required"] == ["code"]
    a = tools.anthropic()
    assert a["name"] == "run_python" and a["input_schema"]["properties"]["code"]["type"] == "string"
    json.dumps([o, a])  # plain JSON, as the APIs take it


def test_parse_call_both_formats() -> None:
    openai_call = {"id": "call_1", "type": "function",
                   "function": {"name": "run_python", "arguments": json.dumps({"code": "print(1)"})}}
    anthropic_call = {"type": "tool_use", "id": "toolu_1", "name": "run_python", "input": {"code": "print(2)"}}
    sdk_object = types.SimpleNamespace(id="call_2", function=types.SimpleNamespace(name="run_python",
                                                                                    arguments='{"code": "3"}'))
    assert tools.parse_call(openai_call) == ("call_1", "print(1)")
    assert tools.parse_call(anthropic_call) == ("toolu_1", "print(2)")
    assert tools.parse_call(sdk_object) == ("call_2", "3")
    with pytest.raises(ValueError):
        tools.parse_call({"name": "other", "input": {"code": ""}})
    with pytest.raises(ValueError):
        tools.parse_call({"name": "run_python", "arguments": "{not json"})


def test_handle_over_http(server: Server) -> None:
    sb = server.sandbox()
    call = {"type": "tool_use", "id": "t", "name": "run_python",
            "input": {"code": "import matplotlib.pyplot as plt\nprint('hello')\nplt.plot([1, 2])\nplt.savefig('c.png')"}}
    out = tools.handle(call, sb)
    assert isinstance(out, str) and "hello" in out and "attached" in out, out
    # One image either way: the open figure of a session cell, or the
    # c.png file of a one-shot run on a server without sessions.
    (mime, data), = out.images
    assert mime == "image/png" and base64.b64decode(data).startswith(PNG_MAGIC)
    blocks = out.anthropic_content()
    assert blocks[0]["type"] == "text" and blocks[1]["source"]["media_type"] == "image/png"
    parts = out.openai_content()
    assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,")


def test_handle_budget_and_error(binary: str) -> None:
    sb = sbx.Sandbox.local(binary=binary)
    code = ("def f(n):\n    return f(n - 1) if n else 1 / 0\nprint('x' * 100000)\nf(20)\n")
    out = tools.handle({"function": {"name": "run_python", "arguments": json.dumps({"code": code})}}, sb,
                       max_chars=3000)
    assert len(out) <= 3100, len(out)
    assert "characters elided" in out and "ZeroDivisionError" in out
    assert out.images == [] and out.openai_content() == str(out)


def test_render_execution_keeps_the_last_frames() -> None:
    frames = [{"file": "<cell-1>", "line": i, "function": "f%d" % i, "code": "f%d()" % (i + 1)} for i in range(10)]
    ex = sbx.Execution({"execution_count": 1, "error": {"name": "RecursionError", "value": "deep", "traceback": frames},
                        "results": [{"text": "7", "is_main_result": True}],
                        "logs": [{"stream": "stdout", "data": "out\n"}]})
    out = tools.render(ex, max_frames=3)
    assert "f9" in out and "f7" in out and "f6" not in out and "RecursionError: deep" in out and "out" in out
