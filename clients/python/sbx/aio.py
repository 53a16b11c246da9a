"""The async client: :class:`AsyncSandbox`, the twin of :class:`sbx.Sandbox`.

It needs httpx (Debian: python3-httpx; ``pip install ./clients/python[async]``);
the rest of the package does not. Every method of Sandbox is here with the
same arguments, as a coroutine: ``await sandbox.run_code(...)``.
"""

from __future__ import annotations

import asyncio
import json
import urllib.parse
from typing import Any, AsyncIterator, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

try:
    import httpx
except ImportError as e:  # pragma: no cover - depends on the host
    raise ImportError("sbx.AsyncSandbox needs httpx: apt-get install python3-httpx, or "
                      "pip install 'sbx-client[async]'; the sync sbx.Sandbox needs nothing") from e

from ._core import (MAX_LINE, NDJSON, Callback, CellStream, ExecStream, FileData, cell_body, env_token, env_url,
                    exec_body, parse_line, retry_delay, session_body)
from ._http import USER_AGENT, RetryHook
from ._local import LocalRun, find_binary
from .errors import (ConnectionFailed, LocalRunError, ProtocolError, SandboxError, SessionExpired,
                     SessionsUnavailable, error_from_response, parse_retry_after)
from .models import Execution, FileEntry, OutputMessage, Result
from .sandbox import _NO_SERVER

__all__ = ["AsyncSandbox", "AsyncFiles", "run"]


class _AsyncHTTP:
    def __init__(self, url: str, token: Optional[str], request_timeout: Optional[float], max_retries: int,
                 backoff: float, on_retry: RetryHook, max_backoff: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.max_retries, self.backoff, self.max_backoff, self.on_retry = max_retries, backoff, max_backoff, on_retry
        timeout = httpx.Timeout(request_timeout, connect=10.0)
        if self.url.startswith("unix:"):
            transport = httpx.AsyncHTTPTransport(uds=self.url[len("unix:"):])
            self.base = "http://localhost"
            self.client = httpx.AsyncClient(transport=transport, timeout=timeout)
        else:
            u = urllib.parse.urlsplit(self.url)
            if u.scheme not in ("http", "https") or not u.netloc:
                raise ValueError("url %r: want http://HOST:PORT, https://HOST[:PORT] or unix:/PATH" % url)
            self.base = self.url
            self.client = httpx.AsyncClient(timeout=timeout)

    def _headers(self, accept: str, content_type: Optional[str]) -> Dict[str, str]:
        h = {"Accept": accept, "User-Agent": USER_AGENT}
        if content_type:
            h["Content-Type"] = content_type
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        return h

    async def _open(self, method: str, path: str, body: Optional[bytes], accept: str,
                    content_type: Optional[str]) -> httpx.Response:
        attempt = 0
        while True:
            req = self.client.build_request(method, self.base + path, content=body,
                                            headers=self._headers(accept, content_type))
            try:
                resp = await self.client.send(req, stream=True)
            except httpx.HTTPError as e:
                raise ConnectionFailed("%s %s: %s: %s" % (method, path, type(e).__name__, e)) from e
            if 200 <= resp.status_code < 300:
                return resp
            try:
                data = await resp.aread()
            except httpx.HTTPError:
                data = b""
            finally:
                await resp.aclose()
            if resp.status_code in (429, 503) and attempt < self.max_retries:
                delay = retry_delay(attempt, parse_retry_after(resp.headers.get("Retry-After")), self.backoff,
                                    self.max_backoff)
                if self.on_retry is not None:
                    self.on_retry(attempt + 1, resp.status_code, delay)
                await asyncio.sleep(delay)
                attempt += 1
                continue
            raise error_from_response(resp.status_code, data[: 1 << 20], dict(resp.headers), method, path)

    async def call(self, method: str, path: str, *, json_body: Any = None, data: Optional[bytes] = None,
                   accept: str = "application/json") -> Tuple[bytes, Mapping[str, str]]:
        body, ctype = _body(json_body, data)
        resp = await self._open(method, path, body, accept, ctype)
        try:
            return await resp.aread(), resp.headers
        except httpx.HTTPError as e:
            raise ConnectionFailed("%s %s: reading the answer: %s" % (method, path, e)) from e
        finally:
            await resp.aclose()

    async def call_json(self, method: str, path: str, *, json_body: Any = None, data: Optional[bytes] = None) -> Any:
        raw, headers = await self.call(method, path, json_body=json_body, data=data)
        if not raw.strip():
            return {}
        try:
            return json.loads(raw)
        except ValueError as e:
            raise ProtocolError("%s %s: the answer is not JSON: %s" % (method, path, e),
                                request_id=headers.get("X-Request-Id")) from e

    async def stream(self, method: str, path: str, *, json_body: Any = None) -> AsyncIterator[Dict[str, Any]]:
        body, ctype = _body(json_body, None)
        resp = await self._open(method, path, body, NDJSON, ctype)
        try:
            if NDJSON not in resp.headers.get("Content-Type", ""):
                yield {"type": "whole", "body": json.loads(await resp.aread())}
                return
            buf = b""
            try:
                async for chunk in resp.aiter_bytes():
                    buf += chunk
                    while b"\n" in buf:
                        line, buf = buf.split(b"\n", 1)
                        doc = parse_line(line)
                        if doc is not None:
                            yield doc
                    if len(buf) > MAX_LINE:
                        raise ProtocolError("%s %s: a streamed line is longer than %d bytes" % (method, path, MAX_LINE))
            except httpx.HTTPError as e:
                raise ConnectionFailed("%s %s: the stream broke: %s" % (method, path, e)) from e
            doc = parse_line(buf)
            if doc is not None:
                yield doc
        except ValueError as e:
            raise ProtocolError("%s %s: the answer is not JSON: %s" % (method, path, e)) from e
        finally:
            await resp.aclose()

    async def aclose(self) -> None:
        await self.client.aclose()


def _body(json_body: Any, data: Optional[bytes]) -> Tuple[Optional[bytes], Optional[str]]:
    if data is not None:
        return data, "application/octet-stream"
    if json_body is not None:
        return json.dumps(json_body).encode("utf-8"), "application/json"
    return None, None


class AsyncFiles:
    """A session's workspace, async (see :class:`sbx.Files`)."""

    def __init__(self, sandbox: "AsyncSandbox") -> None:
        self._sb = sandbox

    async def _path(self, path: Optional[str] = None) -> str:
        base = "/v1/sessions/%s/files" % urllib.parse.quote(await self._sb.session_id(), safe="")
        return base + ("?path=" + urllib.parse.quote(path, safe="/") if path is not None else "")

    async def write(self, path: str, data: FileData) -> FileEntry:
        raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        doc = await self._sb._http().call_json("PUT", await self._path(path), data=raw)
        return FileEntry.from_json(doc if isinstance(doc, dict) and doc.get("path") else {"path": path, "size": len(raw)})

    async def read(self, path: str, format: str = "text") -> Union[str, bytes]:
        raw, _ = await self._sb._http().call("GET", await self._path(path), accept="application/octet-stream")
        if format == "bytes":
            return raw
        if format != "text":
            raise ValueError("format %r: want \"text\" or \"bytes\"" % format)
        return raw.decode("utf-8")

    async def list(self, path: Optional[str] = None) -> List[FileEntry]:
        doc = await self._sb._http().call_json("GET", await self._path(path))
        entries = doc.get("files", doc.get("entries")) if isinstance(doc, dict) else doc
        return [FileEntry.from_json(e) for e in entries or [] if isinstance(e, dict)]

    async def remove(self, path: str) -> None:
        await self._sb._http().call("DELETE", await self._path(path))


class AsyncSandbox:
    """The async twin of :class:`sbx.Sandbox`: the same constructor and
    methods, each a coroutine. ``async with await AsyncSandbox.create(...)``
    or ``async with AsyncSandbox(url=...)`` closes the session and the
    connection pool."""

    def __init__(self, url: Optional[str] = None, token: Optional[str] = None, *, profile: Optional[str] = None,
                 timeout: Optional[float] = None, idle_timeout: Optional[float] = None,
                 limits: Optional[Mapping[str, Any]] = None, env: Optional[Mapping[str, str]] = None,
                 metadata: Optional[Mapping[str, Any]] = None, request_timeout: Optional[float] = None,
                 max_retries: int = 5, backoff: float = 0.5, on_retry: RetryHook = None,
                 _local_binary: Optional[str] = None, _local: bool = False) -> None:
        self.profile, self.timeout, self.idle_timeout = profile, timeout, idle_timeout
        self.limits, self.env, self.metadata = dict(limits or {}), dict(env or {}), dict(metadata or {})
        self._session: Optional[str] = None
        self.expires_at: Optional[str] = None
        self._transport: Optional[_AsyncHTTP] = None
        self._binary: Optional[str] = None
        if _local:
            self._binary = find_binary(_local_binary)
        else:
            u = env_url(url)
            if not u:
                raise SandboxError("no server: give url= or set $SBX_URL (sbx serve's address); "
                                   "AsyncSandbox.local() runs the local sbx binary with no server")
            self._transport = _AsyncHTTP(u, env_token(token), request_timeout, max_retries, backoff, on_retry)
        self.files = AsyncFiles(self)

    @classmethod
    def local(cls, profile: Optional[str] = None, *, binary: Optional[str] = None,
              limits: Optional[Mapping[str, Any]] = None, env: Optional[Mapping[str, str]] = None) -> "AsyncSandbox":
        return cls(profile=profile, limits=limits, env=env, _local_binary=binary, _local=True)

    @classmethod
    async def create(cls, profile: Optional[str] = None, timeout: Optional[float] = None, *,
                     url: Optional[str] = None, token: Optional[str] = None, from_snapshot: Optional[str] = None,
                     **kw: Any) -> "AsyncSandbox":
        sb = cls(url, token, profile=profile, timeout=timeout, **kw)
        try:
            await sb._start(from_snapshot)
        except BaseException:
            await sb.close()
            raise
        return sb

    async def __aenter__(self) -> "AsyncSandbox":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        try:
            await self.kill()
        finally:
            await self.close()

    async def close(self) -> None:
        """Close the connection pool (not the session: :meth:`kill` ends it)."""
        if self._transport is not None:
            await self._transport.aclose()

    def _http(self) -> _AsyncHTTP:
        if self._transport is None:
            raise SessionsUnavailable(_NO_SERVER)
        return self._transport

    async def _start(self, from_snapshot: Optional[str] = None) -> str:
        body = session_body(self.profile, self.timeout, self.idle_timeout, self.limits, self.env, self.metadata,
                            from_snapshot)
        doc = await self._http().call_json("POST", "/v1/sessions", json_body=body)
        if not isinstance(doc, dict) or not doc.get("id"):
            raise ProtocolError("POST /v1/sessions: the answer has no session id: %r" % (doc,))
        self._session, self.expires_at = str(doc["id"]), doc.get("expires_at")
        return self._session

    async def session_id(self) -> str:
        return self._session or await self._start()

    @property
    def sandbox_id(self) -> Optional[str]:
        return self._session

    async def _spath(self, suffix: str) -> str:
        return "/v1/sessions/%s%s" % (urllib.parse.quote(await self.session_id(), safe=""), suffix)

    async def run(self, code: Optional[str] = None, *, argv: Optional[Sequence[str]] = None,
                  files: Optional[Mapping[str, FileData]] = None, stdin: Optional[str] = None,
                  env: Optional[Mapping[str, str]] = None, limits: Optional[Mapping[str, Any]] = None,
                  timeout: Optional[float] = None, outputs: bool = True, profile: Optional[str] = None,
                  metadata: Optional[Mapping[str, Any]] = None, on_stdout: Callback = None,
                  on_stderr: Callback = None) -> Result:
        """One run in a fresh sandbox (see :meth:`sbx.Sandbox.run`)."""
        profile = profile or self.profile
        lim = {**self.limits, **(limits or {})}
        allenv = {**self.env, **(env or {})}
        if self._transport is None:
            assert self._binary is not None
            prepared = LocalRun(self._binary, code, argv, profile, files, allenv, lim, timeout, outputs)
            try:
                try:
                    p = await asyncio.create_subprocess_exec(*prepared.argv, stdin=asyncio.subprocess.PIPE,
                                                             stdout=asyncio.subprocess.PIPE,
                                                             stderr=asyncio.subprocess.PIPE)
                except OSError as e:
                    raise LocalRunError("the sbx binary %r: %s" % (prepared.argv[0], e)) from e
                out, err = await p.communicate((stdin or "").encode("utf-8"))
                res = prepared.result(p.returncode if p.returncode is not None else -1, out, err)
            finally:
                prepared.cleanup()
            if on_stdout and res.stdout:
                on_stdout(OutputMessage(res.stdout, 0, False))
            if on_stderr and res.stderr:
                on_stderr(OutputMessage(res.stderr, 0, True))
            return res
        body = exec_body(code, list(argv) if argv is not None else None, profile, files, stdin, allenv, lim,
                         timeout, outputs, {**self.metadata, **(metadata or {})})
        if on_stdout is None and on_stderr is None:
            return Result.from_response(await self._transport.call_json("POST", "/v1/exec", json_body=body))
        st = ExecStream(on_stdout, on_stderr)
        async for doc in self._transport.stream("POST", "/v1/exec", json_body=body):
            if doc.get("type") == "whole":
                return Result.from_response(doc["body"])
            st.feed(doc)
        return st.finish()

    async def run_code(self, code: str, *, timeout: Optional[float] = None, env: Optional[Mapping[str, str]] = None,
                       on_stdout: Callback = None, on_stderr: Callback = None,
                       on_result: Optional[Callable[[Any], Any]] = None,
                       on_error: Optional[Callable[[Any], Any]] = None) -> Execution:
        """One cell in the session (see :meth:`sbx.Sandbox.run_code`)."""
        path = await self._spath("/exec")
        body = cell_body(code, timeout, env)
        if on_stdout is None and on_stderr is None and on_result is None and on_error is None:
            return Execution(await self._http().call_json("POST", path, json_body=body))
        st = CellStream(on_stdout, on_stderr, on_result, on_error)
        async for doc in self._http().stream("POST", path, json_body=body):
            if doc.get("type") == "whole":
                return Execution(doc["body"])
            st.feed(doc)
        return st.finish()

    async def interrupt(self) -> None:
        await self._http().call("POST", await self._spath("/interrupt"))

    async def restart(self) -> None:
        await self._http().call("POST", await self._spath("/restart"))

    async def snapshot(self) -> str:
        doc = await self._http().call_json("POST", await self._spath("/snapshot"))
        sid = doc.get("snapshot_id") if isinstance(doc, dict) else None
        if not sid:
            raise ProtocolError("POST /snapshot: the answer has no snapshot_id: %r" % (doc,))
        return str(sid)

    async def kill(self) -> bool:
        if self._session is None or self._transport is None:
            return False
        sid, self._session = self._session, None
        try:
            await self._transport.call("DELETE", "/v1/sessions/%s" % urllib.parse.quote(sid, safe=""))
        except SessionExpired:
            return False
        return True

    async def profiles(self) -> List[Dict[str, Any]]:
        doc = await self._http().call_json("GET", "/v1/profiles")
        return list(doc.get("profiles") or []) if isinstance(doc, dict) else []

    async def version(self) -> Dict[str, Any]:
        return dict(await self._http().call_json("GET", "/v1/version"))


async def run(code: Optional[str] = None, *, profile: Optional[str] = None,
              files: Optional[Mapping[str, FileData]] = None, url: Optional[str] = None, token: Optional[str] = None,
              local: Optional[bool] = None, binary: Optional[str] = None, **kw: Any) -> Result:
    """The async one-shot (see :func:`sbx.run`)."""
    if local or (local is None and not env_url(url)):
        return await AsyncSandbox.local(profile, binary=binary).run(code, files=files, **kw)
    sb = AsyncSandbox(url, token, profile=profile)
    try:
        return await sb.run(code, files=files, **kw)
    finally:
        await sb.close()
