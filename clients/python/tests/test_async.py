"""AsyncSandbox against a real `sbx serve`, and locally."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import sbx
from sbx.aio import AsyncSandbox
from sbx.aio import run as arun

from conftest import PNG_MAGIC, Server, wait_until


def go(coro):
    return asyncio.run(coro)


def test_async_one_shot(server: Server) -> None:
    async def main():
        async with AsyncSandbox(server.url, server.token) as sb:
            res = await sb.run("print(open('a.txt').read() * 2)", files={"a.txt": "ab"})
            v = await sb.version()
            profiles = await sb.profiles()
            return res, v, profiles

    res, v, profiles = go(main())
    assert res.ok and res.stdout == "abab\n", res.raw
    assert v["version"] and "standard" in [p["name"] for p in profiles]


def test_async_runs_concurrently(server: Server) -> None:
    async def main():
        async with AsyncSandbox(server.url, server.token) as sb:
            return await asyncio.gather(*(sb.run("print(%d)" % i) for i in range(3)))

    results = go(main())
    assert [r.stdout for r in results] == ["0\n", "1\n", "2\n"]


def test_async_streaming(server: Server) -> None:
    seen = []

    async def main():
        return await arun("import time\nprint('x', flush=True)\ntime.sleep(3)\nprint('y')", url=server.url,
                          token=server.token, on_stdout=lambda m: seen.append((str(m), time.monotonic())))

    res = go(main())
    done = time.monotonic()
    assert res.ok and "".join(m for m, _ in seen) == "x\ny\n"
    assert done - seen[0][1] > 1.5, seen


def test_async_errors(server: Server) -> None:
    async def bad_token():
        async with AsyncSandbox(server.url, "nope") as sb:
            await sb.run("print(1)")

    with pytest.raises(sbx.AuthError):
        go(bad_token())

    async def bad_profile():
        async with AsyncSandbox(server.url, server.token) as sb:
            await sb.run("print(1)", profile="no-such-profile")

    with pytest.raises(sbx.InvalidRequest, match="no-such-profile"):
        go(bad_profile())

    async def sessions():
        try:
            sb = await AsyncSandbox.create(url=server.url, token=server.token)
        except sbx.SessionsUnavailable as e:
            return str(e)
        await sb.kill()
        await sb.close()
        return None

    msg = go(sessions())
    assert msg is None or "no sessions" in msg


def test_async_429_retry(busy_server: Server) -> None:
    t = threading.Thread(target=lambda: busy_server.sandbox().run("import time; time.sleep(4)"))
    t.start()
    assert wait_until(lambda: busy_server.ready() == 503, 60)
    retries = []

    async def main():
        async with AsyncSandbox(busy_server.url, busy_server.token, max_retries=30,
                                on_retry=lambda *a: retries.append(a)) as sb:
            return await sb.run("print('in')")

    res = go(main())
    t.join()
    assert res.ok and res.stdout == "in\n"
    assert retries and all(s == 429 and d == 1.0 for _, s, d in retries), retries


def test_async_local(binary: str) -> None:
    async def main():
        sb = AsyncSandbox.local("data", binary=binary)
        res = await sb.run("import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.savefig('p.png')\nprint('ok')")
        with pytest.raises(sbx.SessionsUnavailable, match="sessions need a server"):
            await sb.run_code("x = 1")
        return res

    res = go(main())
    assert res.ok and res.stdout == "ok\n" and res.outputs["p.png"].startswith(PNG_MAGIC)


def test_async_session_state(server: Server) -> None:
    async def main():
        sb = await AsyncSandbox.create(url=server.url, token=server.token, timeout=120)
        async with sb:
            await sb.run_code("x = 41")
            ex = await sb.run_code("x + 1")
            await sb.files.write("f.txt", "hi")
            text = await sb.files.read("f.txt")
            listed = {f.path for f in await sb.files.list()}
            await sb.files.remove("f.txt")
            after = {f.path for f in await sb.files.list()}
            chunks = []
            streamed = await sb.run_code("print('s', flush=True)\nx", on_stdout=chunks.append)
            await sb.interrupt()
            await sb.restart()
            lost = await sb.run_code("x")
            return ex, text, listed, after, chunks, streamed, lost

    ex, text, listed, after, chunks, streamed, lost = go(main())
    assert ex.text == "42" and ex.execution_count == 2 and text == "hi"
    assert "f.txt" in listed and "f.txt" not in after
    assert [str(c) for c in chunks] == ["s\n"] and streamed.text == "41"
    assert lost.error is not None and lost.error.name == "NameError"
