"""The sync client against a real `sbx serve`: one-shot runs, every
server call, streaming, errors, 429 handling."""

from __future__ import annotations

import base64
import hashlib
import threading
import time

import pytest

import sbx
from sbx._http import HTTPTransport

from conftest import PNG_MAGIC, Server, wait_until


def test_run_ok_with_files_in_and_out(server: Server) -> None:
    csv = "a,b\n1,2\n3,4\n"
    res = sbx.run("import csv\nrows = list(csv.DictReader(open('in/data.csv')))\n"
                  "print(sum(int(r['b']) for r in rows))\nopen('out.txt', 'w').write('done')\n",
                  files={"in/data.csv": csv}, url=server.url, token=server.token)
    assert isinstance(res, sbx.Result)
    assert res.status == "ok" and res.ok and res.exit_code == 0, res.raw
    assert res.stdout == "6\n"
    assert res.request_id and res.id
    assert res.usage["wall_ms"] >= 0 and "memory" in res.limits
    assert res.outputs == {"out.txt": b"done"}
    (out,) = [f for f in res.files if f.path == "out.txt"]
    assert out.change == "created" and out.size == 4
    assert out.sha256 == hashlib.sha256(b"done").hexdigest()
    (inp,) = [f for f in res.inputs if f.path == "in/data.csv"]
    assert inp.sha256 == hashlib.sha256(csv.encode()).hexdigest()
    assert res.raise_for_status() is res


def test_run_exit_stdin_env_argv(sandbox: sbx.Sandbox) -> None:
    res = sandbox.run("import os, sys\nprint(sys.stdin.read().upper(), os.environ['TASK'])\nsys.exit(3)",
                      stdin="hello", env={"TASK": "t-42"})
    assert res.status == "exit" and res.exit_code == 3
    assert res.stdout == "HELLO t-42\n"
    res.raise_for_status()  # a nonzero exit is the payload's, not a client error
    res = sandbox.run(argv=["/bin/sh", "-c", "echo $0", "argv-ok"])
    assert res.ok and res.stdout == "argv-ok\n"


def test_limits_and_raise_for_status(sandbox: sbx.Sandbox) -> None:
    res = sandbox.run("while True: pass", timeout=1)
    assert res.status == "timeout", res.raw
    with pytest.raises(sbx.TimeoutExceeded) as ei:
        res.raise_for_status()
    assert ei.value.limit == "timeout" and ei.value.result is res
    res = sandbox.run("x = bytearray(400 << 20)", limits={"memory": "64M"})
    assert res.status == "memory_limit", res.raw
    assert res.limits["memory"]["value"] in (64 << 20, "64M", 67108864) or res.limits["memory"]
    with pytest.raises(sbx.LimitExceeded) as ei:
        res.raise_for_status()
    assert ei.value.limit == "memory_limit"


def test_png_output(sandbox: sbx.Sandbox) -> None:
    code = ("import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
            "plt.plot([1, 2, 3], [4, 1, 9])\nplt.savefig('chart.png')\n")
    res = sandbox.run(code, profile="data")
    assert res.ok, res.raw
    png = res.outputs["chart.png"]
    assert png.startswith(PNG_MAGIC) and len(png) > 1000
    (f,) = [f for f in res.files if f.path == "chart.png"]
    assert f.sha256 == hashlib.sha256(png).hexdigest()


def test_server_calls(sandbox: sbx.Sandbox) -> None:
    v = sandbox.version()
    assert v["version"] and v["commit"]
    names = [p["name"] for p in sandbox.profiles()]
    assert {"standard", "strict", "data"} <= set(names)


def test_streaming_callbacks_fire_before_the_run_ends(sandbox: sbx.Sandbox) -> None:
    seen = []
    code = ("import sys, time\nprint('first', flush=True)\nprint('oops', file=sys.stderr, flush=True)\n"
            "time.sleep(3)\nprint('second', flush=True)\n")
    res = sandbox.run(code, on_stdout=lambda m: seen.append(("out", m, time.monotonic())),
                      on_stderr=lambda m: seen.append(("err", m, time.monotonic())))
    done = time.monotonic()
    assert res.ok and res.stdout == "first\nsecond\n", res.raw
    outs = [m for k, m, _ in seen if k == "out"]
    assert "".join(str(m) for m in outs) == "first\nsecond\n"
    assert all(isinstance(m, sbx.OutputMessage) and not m.error for m in outs)
    errs = [m for k, m, _ in seen if k == "err"]
    assert "".join(m.line for m in errs) == res.stderr and "oops\n" in res.stderr, (errs, res.stderr)
    assert all(m.error for m in errs)
    first_at = next(t for k, m, t in seen if k == "out" and "first" in m.line)
    # The run sleeps 3 s after 'first': its callback came well before the end.
    assert done - first_at > 1.5, (done - first_at, seen)


def test_auth_errors(server: Server) -> None:
    with pytest.raises(sbx.AuthError) as ei:
        sbx.Sandbox(server.url, "wrong-token").run("print(1)")
    assert ei.value.status == 401 and ei.value.code == "unauthorized"
    with pytest.raises(sbx.AuthError):
        sbx.Sandbox(server.url, "").version()


def test_error_mapping(server: Server, sandbox: sbx.Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(sbx.InvalidRequest) as ei:
        sandbox.run("print(1)", profile="no-such-profile")
    assert ei.value.status == 400 and "no-such-profile" in str(ei.value)
    with pytest.raises(sbx.InvalidRequest) as ei:
        sandbox.run("print(1)", profile="strict", limits={"memory": "64G"})
    assert "limits.memory" in str(ei.value) and ei.value.request_id
    with pytest.raises(sbx.NotFound):
        HTTPTransport(server.url, server.token).call("GET", "/v1/no-such-endpoint")
    with pytest.raises(sbx.ConnectionFailed):
        sbx.Sandbox("http://127.0.0.1:9", "t", max_retries=0).version()
    with pytest.raises(ValueError):
        sbx.Sandbox("ftp://127.0.0.1:1", "t")
    monkeypatch.delenv("SBX_URL", raising=False)
    with pytest.raises(sbx.SandboxError, match="no server"):
        sbx.Sandbox()
    with pytest.raises(ValueError):
        sandbox.run()  # neither code nor argv


def test_sessions_absent_say_so(server: Server) -> None:
    """Without sessions the error says what works instead; with them a
    session starts (tests/test_sessions.py covers it)."""
    try:
        sb = sbx.Sandbox.create(url=server.url, token=server.token)
    except sbx.SessionsUnavailable as e:
        assert e.status == 404 and "one-shot runs work" in str(e)
    else:
        assert sb.sandbox_id
        assert sb.kill() is True


def _hold_the_worker(server: Server, seconds: float) -> threading.Thread:
    t = threading.Thread(target=lambda: server.sandbox(max_retries=0).run("import time; time.sleep(%g)" % seconds))
    t.start()
    assert wait_until(lambda: server.ready() == 503, 60), "the long run never took the only worker"
    return t


def test_429_is_retried_after_retry_after(busy_server: Server) -> None:
    t = _hold_the_worker(busy_server, 4)
    retries = []
    res = busy_server.sandbox(on_retry=lambda n, status, delay: retries.append((n, status, delay)),
                              max_retries=30).run("print('after the wait')")
    t.join()
    assert res.ok and res.stdout == "after the wait\n"
    assert retries, "the run was never turned away: the test did not exercise 429"
    # sbx serve says Retry-After: 1; the client waits that, not its own backoff.
    assert all(status == 429 and delay == 1.0 for _, status, delay in retries), retries
    assert [n for n, _, _ in retries] == list(range(1, len(retries) + 1))


def test_429_without_retries_is_rate_limited(busy_server: Server) -> None:
    t = _hold_the_worker(busy_server, 3)
    try:
        with pytest.raises(sbx.RateLimited) as ei:
            busy_server.sandbox(max_retries=0).run("print(1)")
        assert ei.value.status == 429 and ei.value.retry_after == 1.0 and ei.value.code == "busy"
    finally:
        t.join()


def test_413(busy_server: Server) -> None:
    with pytest.raises(sbx.PayloadTooLarge) as ei:
        busy_server.sandbox().run("print(1)", files={"big.bin": b"\0" * 100_000})
    assert ei.value.status == 413


def test_durations_are_go_durations() -> None:
    from sbx._core import duration

    assert [duration(1), duration(0.5), duration(1e6), duration(0.0004)] == ["1s", "0.5s", "1000000s", "1ms"]
    with pytest.raises(ValueError):
        duration(0)


def test_retry_delay_follows_retry_after_else_backs_off() -> None:
    from sbx._core import retry_delay
    from sbx.errors import parse_retry_after

    assert retry_delay(0, 2.0, 0.5, 30) == 2.0
    assert retry_delay(5, 100.0, 0.5, 30) == 30
    assert all(0 <= retry_delay(3, None, 0.5, 30) <= 4.0 for _ in range(100))
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0
    assert parse_retry_after("garbage") is None


def test_models_parse_issue_15_shapes() -> None:
    """The Execution JSON of issue 15 maps to E2B's names."""
    png = base64.b64encode(PNG_MAGIC + b"rest").decode()
    ex = sbx.Execution({
        "execution_count": 2, "status": "error", "state_lost": False,
        "logs": [{"stream": "stdout", "data": "a\n", "t_ms": 1}, {"stream": "stderr", "data": "w\n", "t_ms": 2},
                 {"stream": "stdout", "data": "b\n", "t_ms": 3}],
        "results": [{"text": "42", "is_main_result": True}, {"png": png, "text": "<Figure>"}],
        "error": {"name": "ZeroDivisionError", "value": "division by zero",
                  "traceback": [{"file": "<cell-2>", "line": 1, "function": "<module>", "code": "1/0"}]},
        "usage": {"wall_ms": 3},
    })
    assert ex.logs.stdout == ["a\n", "b\n"] and ex.logs.stderr == ["w\n"]
    assert ex.text == "42" and ex.execution_count == 2
    assert ex.results[1].data("png").startswith(PNG_MAGIC) and ex.results[1].formats() == ["text", "png"]
    assert ex.error.name == "ZeroDivisionError" and ex.error.frames[0].line == 1
    assert 'File "<cell-2>", line 1' in ex.error.traceback and ex.error.traceback.endswith("division by zero")
    assert ex.usage == {"wall_ms": 3}
    # A large item went to a workspace file; a one-shot Result's figures.
    big = sbx.Execution({"results": [{"is_main_result": True, "files": {"html": {"path": ".sbx/results/1-1.html", "size": 5, "sha256": "ab"}}}],
                         "results_truncated": True, "results_truncated_reason": "why"})
    f = big.results[0].files["html"]
    assert f.path == ".sbx/results/1-1.html" and f.size == 5 and f.sha256 == "ab" and big.results[0].html is None
    assert big.results_truncated and big.results_truncated_reason == "why" and big.results[0].extra == {}
    res = sbx.Result({"status": "ok", "results": [{"png": png, "is_main_result": False}], "results_truncated": True})
    assert res.results[0].data("png").startswith(PNG_MAGIC) and res.results_truncated
