"""Sessions (issue 15's API) through the client: state across run_code,
rich results, errors, timeouts, files, snapshot, kill.

Each runs on a real session of the binary under test, which has them:
none skips, and none passes without a session.
"""

from __future__ import annotations

import hashlib
import time

import pytest

import sbx

from conftest import PNG_MAGIC, Server, new_session


def test_state_across_run_code(session: sbx.Sandbox) -> None:
    first = session.run_code("x = 41")
    assert first.error is None, first.raw
    assert not any(r.is_main_result for r in first.results)  # an assignment has no value
    ex = session.run_code("x + 1")
    assert ex.text == "42"
    assert ex.execution_count == 2
    assert [r.is_main_result for r in ex.results].count(True) == 1
    assert ex.error is None


def test_error_keeps_the_session(session: sbx.Sandbox) -> None:
    session.run_code("x = 41")
    ex = session.run_code("y = 2\n1/0\n")
    assert ex.error is not None and ex.error.name == "ZeroDivisionError"
    assert "division by zero" in ex.error.value
    assert any(f.line == 2 for f in ex.error.frames), ex.error.frames
    assert "ZeroDivisionError" in ex.error.traceback
    assert session.run_code("x").text == "41"


def test_cell_timeout_interrupts_and_keeps_state(session: sbx.Sandbox) -> None:
    session.run_code("x = 41")
    ex = session.run_code("while True: pass", timeout=1)
    assert ex.status == "timeout", ex.raw
    with pytest.raises(sbx.TimeoutExceeded):
        ex.raise_for_status()
    assert not ex.state_lost
    assert session.run_code("x").text == "41"


def test_streaming_cell(session: sbx.Sandbox) -> None:
    seen = []
    ex = session.run_code("import sys, time\nprint('a', flush=True)\ntime.sleep(3)\nprint('b', file=sys.stderr)\n7",
                          on_stdout=lambda m: seen.append(("out", str(m), time.monotonic())),
                          on_stderr=lambda m: seen.append(("err", str(m), time.monotonic())))
    done = time.monotonic()
    assert ex.text == "7"
    assert "".join(m for k, m, _ in seen if k == "out") == "a\n" and ex.logs.stdout == ["a\n"]
    assert "".join(m for k, m, _ in seen if k == "err") == "b\n"
    assert done - seen[0][2] > 1.5, seen


def test_png_result(server: Server) -> None:
    sb = new_session(server)
    try:
        ex = sb.run_code("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [3, 1, 2])")
        pngs = [r for r in ex.results if r.png]
        assert pngs, ex.raw
        assert pngs[0].data("png").startswith(PNG_MAGIC)
    finally:
        sb.kill()


def test_files(session: sbx.Sandbox) -> None:
    session.files.write("in/data.csv", "a,b\n1,2\n")
    ex = session.run_code("print(open('in/data.csv').read().upper(), end='')\nopen('out.bin', 'wb').write(b'\\x00\\xff')")
    assert ex.error is None and ex.logs.stdout == ["A,B\n1,2\n"], ex.raw
    assert session.files.read("out.bin", format="bytes") == b"\x00\xff"
    assert session.files.read("in/data.csv") == "a,b\n1,2\n"
    listing = {f.path: f for f in session.files.list()}
    assert listing["out.bin"].size == 2 and listing["out.bin"].sha256 == hashlib.sha256(b"\x00\xff").hexdigest()
    session.files.remove("out.bin")
    assert "out.bin" not in {f.path for f in session.files.list()}


def test_restart_keeps_the_workspace(session: sbx.Sandbox) -> None:
    session.run_code("x = 1\nopen('kept.txt', 'w').write('kept')")
    session.restart()
    assert session.run_code("open('kept.txt').read()").text == "'kept'"
    assert session.run_code("x").error.name == "NameError"


def test_interrupt_with_nothing_running(session: sbx.Sandbox) -> None:
    session.run_code("x = 1")
    session.interrupt()  # nothing to interrupt: a no-op, not an error
    assert session.run_code("x").text == "1"


def test_snapshot_restores_the_workspace(server: Server) -> None:
    sb = new_session(server)
    try:
        sb.run_code("open('kept.txt', 'w').write('kept')")
        snap = sb.snapshot()
    finally:
        sb.kill()
    restored = sbx.Sandbox.create(url=server.url, token=server.token, from_snapshot=snap)
    try:
        assert restored.files.read("kept.txt") == "kept"
    finally:
        restored.kill()


def test_kill_ends_the_session(server: Server) -> None:
    sb = new_session(server)
    sid = sb.sandbox_id
    sb.run_code("x = 1")
    assert sb.kill() is True
    other = sbx.Sandbox(server.url, server.token)
    other._session = sid
    with pytest.raises(sbx.SessionExpired):
        other.run_code("x")


def test_another_nodes_session_is_misdirected(server: Server) -> None:
    """An id names its node (NODE-HEX): one naming another node gets 421,
    SessionMisdirected with both nodes; this node's ended session 404,
    SessionExpired."""
    sb = new_session(server)
    sid = sb.sandbox_id
    node, _, hexpart = sid.rpartition("-")
    assert node and len(hexpart) == 24 and all(c in "0123456789abcdef" for c in hexpart), sid
    other = sbx.Sandbox(server.url, server.token)
    other._session = "sbx-elsewhere-" + "0a" * 12
    with pytest.raises(sbx.SessionMisdirected) as ei:
        other.run_code("x")
    e = ei.value
    assert e.status == 421 and e.code == "misdirected", e
    assert e.node == "sbx-elsewhere" and e.this_node == node, (e.node, e.this_node)
    assert "sbx-elsewhere" in str(e) and node in str(e)
    assert not isinstance(e, sbx.SessionExpired)
    assert sb.kill() is True
    other._session = sid
    with pytest.raises(sbx.SessionExpired):
        other.run_code("x")


def test_context_manager(server: Server) -> None:
    new_session(server).kill()
    with sbx.Sandbox.create(url=server.url, token=server.token, timeout=60) as sb:
        assert sb.run_code("6 * 7").text == "42"
        sid = sb.sandbox_id
    assert sb.sandbox_id is None and sid
