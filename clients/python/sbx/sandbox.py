"""The sync client: :class:`Sandbox`, and the one-shot :func:`run`."""

from __future__ import annotations

import urllib.parse
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from ._core import (Callback, CellStream, ExecStream, FileData, cell_body, env_token, env_url, exec_body,
                    session_body)
from ._http import HTTPTransport, RetryHook
from ._local import LocalRun, find_binary, run_local
from .errors import ProtocolError, SandboxError, SessionsUnavailable
from .models import Execution, FileEntry, Result

__all__ = ["Sandbox", "Files", "run"]

_NO_SERVER = ("sessions need a server: the local transport runs one-shot `sbx exec` only. Start `sbx serve` "
              "and use Sandbox(url=...) or Sandbox.create(url=...); for a one-shot run use Sandbox.run() or sbx.run()")


class Files:
    """A session's workspace (E2B's ``sandbox.files``): the files go through
    the jail's stream and walk rules, never a bind mount."""

    def __init__(self, sandbox: "Sandbox") -> None:
        self._sb = sandbox

    def _path(self, path: Optional[str] = None) -> str:
        base = "/v1/sessions/%s/files" % urllib.parse.quote(self._sb.session_id(), safe="")
        return base + ("?path=" + urllib.parse.quote(path, safe="/") if path is not None else "")

    def write(self, path: str, data: FileData) -> FileEntry:
        """Put ``data`` (bytes, or text as UTF-8) at ``path`` in the workspace."""
        raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        doc = self._sb._http().call_json("PUT", self._path(path), data=raw)
        return FileEntry.from_json(doc if isinstance(doc, dict) and doc.get("path") else {"path": path, "size": len(raw)})

    def read(self, path: str, format: str = "text") -> Union[str, bytes]:
        """A workspace file: text (UTF-8) by default, ``format="bytes"`` for bytes."""
        raw, _ = self._sb._http().call("GET", self._path(path), accept="application/octet-stream")
        if format == "bytes":
            return raw
        if format != "text":
            raise ValueError("format %r: want \"text\" or \"bytes\"" % format)
        return raw.decode("utf-8")

    def list(self, path: Optional[str] = None) -> List[FileEntry]:
        """Every workspace file (below ``path``), with its size and sha256."""
        doc = self._sb._http().call_json("GET", self._path(path))
        entries = doc.get("files", doc.get("entries")) if isinstance(doc, dict) else doc
        return [FileEntry.from_json(e) for e in entries or [] if isinstance(e, dict)]

    def remove(self, path: str) -> None:
        """Delete a workspace file."""
        self._sb._http().call("DELETE", self._path(path))


class Sandbox:
    """A sandbox on a ``sbx serve`` (``Sandbox(url=..., token=...)``), or
    the local ``sbx`` binary (``Sandbox.local()``).

    ``run()`` is one run in a fresh sandbox, on either transport, and
    returns its :class:`Result`. ``run_code()``, ``files``, ``interrupt()``,
    ``restart()``, ``snapshot()`` and ``kill()`` work on a session: a live
    interpreter whose state lasts across calls (server only). The session
    is created by :meth:`create`, or at the first call that needs it.

    ``url`` and ``token`` default to ``$SBX_URL`` and ``$SBX_TOKEN``.
    429 and 503 answers are retried ``max_retries`` times, waiting what the
    server's Retry-After says, else backing off exponentially; ``on_retry``
    is called as ``on_retry(attempt, http_status, delay_seconds)``.
    """

    def __init__(self, url: Optional[str] = None, token: Optional[str] = None, *, profile: Optional[str] = None,
                 timeout: Optional[float] = None, idle_timeout: Optional[float] = None,
                 limits: Optional[Mapping[str, Any]] = None, env: Optional[Mapping[str, str]] = None,
                 metadata: Optional[Mapping[str, Any]] = None, request_timeout: Optional[float] = None,
                 max_retries: int = 5, backoff: float = 0.5, on_retry: RetryHook = None,
                 _local_binary: Optional[str] = None, _local: bool = False) -> None:
        self.profile = profile
        self.timeout = timeout
        self.idle_timeout = idle_timeout
        self.limits = dict(limits or {})
        self.env = dict(env or {})
        self.metadata = dict(metadata or {})
        self._session: Optional[str] = None
        self.expires_at: Optional[str] = None
        self._transport: Optional[HTTPTransport] = None
        self._binary: Optional[str] = None
        if _local:
            self._binary = find_binary(_local_binary)
        else:
            u = env_url(url)
            if not u:
                raise SandboxError("no server: give url= or set $SBX_URL (sbx serve's address); "
                                   "Sandbox.local() runs the local sbx binary with no server")
            self._transport = HTTPTransport(u, env_token(token), request_timeout=request_timeout,
                                            max_retries=max_retries, backoff=backoff, on_retry=on_retry)
        self.files = Files(self)

    # -- construction ---------------------------------------------------

    @classmethod
    def local(cls, profile: Optional[str] = None, *, binary: Optional[str] = None,
              limits: Optional[Mapping[str, Any]] = None, env: Optional[Mapping[str, str]] = None) -> "Sandbox":
        """The local ``sbx`` binary (``binary=``, else ``$SBX``, else ``$PATH``),
        one ``sbx exec --json`` per :meth:`run`. No sessions: they need a server."""
        return cls(profile=profile, limits=limits, env=env, _local_binary=binary, _local=True)

    @classmethod
    def create(cls, profile: Optional[str] = None, timeout: Optional[float] = None, *, url: Optional[str] = None,
               token: Optional[str] = None, from_snapshot: Optional[str] = None, **kw: Any) -> "Sandbox":
        """A session on a server, started now (E2B's ``Sandbox.create``):
        ``timeout`` is its life in seconds (the session's TTL). Use it as a
        context manager, or call :meth:`kill`."""
        sb = cls(url, token, profile=profile, timeout=timeout, **kw)
        sb._start(from_snapshot)
        return sb

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.kill()

    # -- plumbing -------------------------------------------------------

    @property
    def is_local(self) -> bool:
        return self._transport is None

    def _http(self) -> HTTPTransport:
        if self._transport is None:
            raise SessionsUnavailable(_NO_SERVER)
        return self._transport

    def _start(self, from_snapshot: Optional[str] = None) -> str:
        body = session_body(self.profile, self.timeout, self.idle_timeout, self.limits, self.env, self.metadata,
                            from_snapshot)
        doc = self._http().call_json("POST", "/v1/sessions", json_body=body)
        if not isinstance(doc, dict) or not doc.get("id"):
            raise ProtocolError("POST /v1/sessions: the answer has no session id: %r" % (doc,))
        self._session = str(doc["id"])
        self.expires_at = doc.get("expires_at")
        return self._session

    def session_id(self) -> str:
        """The session's id, creating the session if there is none yet."""
        return self._session or self._start()

    @property
    def sandbox_id(self) -> Optional[str]:
        """E2B's name for the session id (None before the session exists)."""
        return self._session

    def _spath(self, suffix: str) -> str:
        return "/v1/sessions/%s%s" % (urllib.parse.quote(self.session_id(), safe=""), suffix)

    # -- one-shot -------------------------------------------------------

    def run(self, code: Optional[str] = None, *, argv: Optional[Sequence[str]] = None,
            files: Optional[Mapping[str, FileData]] = None, stdin: Optional[str] = None,
            env: Optional[Mapping[str, str]] = None, limits: Optional[Mapping[str, Any]] = None,
            timeout: Optional[float] = None, outputs: bool = True, profile: Optional[str] = None,
            metadata: Optional[Mapping[str, Any]] = None, on_stdout: Callback = None,
            on_stderr: Callback = None) -> Result:
        """One run in a fresh sandbox: ``code`` (Python, run as main.py) or
        ``argv``; ``files`` maps workspace paths to bytes or text. The
        Result's ``outputs`` holds the files the run created or changed.

        Over HTTP, ``on_stdout``/``on_stderr`` get each chunk as the server
        reads it. Locally (``sbx exec --json`` prints one object at the
        end) they get the whole output once the run is over.
        """
        profile = profile or self.profile
        lim = {**self.limits, **(limits or {})}
        allenv = {**self.env, **(env or {})}
        if self._transport is None:
            assert self._binary is not None
            prepared = LocalRun(self._binary, code, argv, profile, files, allenv, lim, timeout, outputs)
            try:
                rc, out, err = run_local(prepared, stdin, None)
                res = prepared.result(rc, out, err)
            finally:
                prepared.cleanup()
            if on_stdout and res.stdout:
                on_stdout(_msg(res.stdout, False))
            if on_stderr and res.stderr:
                on_stderr(_msg(res.stderr, True))
            return res
        body = exec_body(code, list(argv) if argv is not None else None, profile, files, stdin, allenv, lim,
                         timeout, outputs, {**self.metadata, **(metadata or {})})
        if on_stdout is None and on_stderr is None:
            return Result.from_response(self._transport.call_json("POST", "/v1/exec", json_body=body))
        st = ExecStream(on_stdout, on_stderr)
        for doc in self._transport.stream("POST", "/v1/exec", json_body=body):
            if doc.get("type") == "whole":
                return Result.from_response(doc["body"])
            st.feed(doc)
        return st.finish()

    # -- sessions -------------------------------------------------------

    def run_code(self, code: str, *, timeout: Optional[float] = None, env: Optional[Mapping[str, str]] = None,
                 on_stdout: Callback = None, on_stderr: Callback = None,
                 on_result: Optional[Callable[[Any], Any]] = None,
                 on_error: Optional[Callable[[Any], Any]] = None) -> Execution:
        """Run one cell in the session's interpreter (its globals last across
        calls) and return its :class:`Execution`. ``timeout`` (seconds) is
        this cell's wall limit: the cell gets KeyboardInterrupt and the
        state is kept. The callbacks fire as output arrives (streamed)."""
        path = self._spath("/exec")
        body = cell_body(code, timeout, env)
        if on_stdout is None and on_stderr is None and on_result is None and on_error is None:
            return Execution(self._http().call_json("POST", path, json_body=body))
        st = CellStream(on_stdout, on_stderr, on_result, on_error)
        for doc in self._http().stream("POST", path, json_body=body):
            if doc.get("type") == "whole":
                return Execution(doc["body"])
            st.feed(doc)
        return st.finish()

    def interrupt(self) -> None:
        """Interrupt the running cell (KeyboardInterrupt; state kept)."""
        self._http().call("POST", self._spath("/interrupt"))

    def restart(self) -> None:
        """A new interpreter, the workspace kept."""
        self._http().call("POST", self._spath("/restart"))

    def snapshot(self) -> str:
        """Save the workspace (not the interpreter's state); a snapshot id
        for ``Sandbox.create(from_snapshot=...)``."""
        doc = self._http().call_json("POST", self._spath("/snapshot"))
        sid = doc.get("snapshot_id") if isinstance(doc, dict) else None
        if not sid:
            raise ProtocolError("POST /snapshot: the answer has no snapshot_id: %r" % (doc,))
        return str(sid)

    def kill(self) -> bool:
        """End the session and destroy its sandbox. True if there was one."""
        if self._session is None or self._transport is None:
            return False
        sid, self._session = self._session, None
        from .errors import SessionExpired

        try:
            self._transport.call("DELETE", "/v1/sessions/%s" % urllib.parse.quote(sid, safe=""))
        except SessionExpired:
            return False
        return True

    # -- the server -----------------------------------------------------

    def profiles(self) -> List[Dict[str, Any]]:
        """The profiles the server offers, with their limits."""
        doc = self._http().call_json("GET", "/v1/profiles")
        return list(doc.get("profiles") or []) if isinstance(doc, dict) else []

    def version(self) -> Dict[str, Any]:
        """The server's build (version, commit, go)."""
        return dict(self._http().call_json("GET", "/v1/version"))

    def __repr__(self) -> str:
        where = "local %s" % self._binary if self._transport is None else self._transport.url
        return "Sandbox(%s, session=%r)" % (where, self._session)


def _msg(text: str, error: bool) -> Any:
    from .models import OutputMessage

    return OutputMessage(line=text, timestamp=0, error=error)


def run(code: Optional[str] = None, *, profile: Optional[str] = None, files: Optional[Mapping[str, FileData]] = None,
        url: Optional[str] = None, token: Optional[str] = None, local: Optional[bool] = None,
        binary: Optional[str] = None, **kw: Any) -> Result:
    """One-shot: run ``code`` in a fresh sandbox and return its Result.

    On the server at ``url`` (or ``$SBX_URL``) when there is one, else with
    the local ``sbx`` binary; ``local=True`` forces the binary. Other
    keywords are :meth:`Sandbox.run`'s (``argv``, ``stdin``, ``env``,
    ``limits``, ``timeout``, ``outputs``, ``on_stdout``, ...).
    """
    if local or (local is None and not env_url(url)):
        sb = Sandbox.local(profile, binary=binary)
    else:
        sb = Sandbox(url, token, profile=profile)
    return sb.run(code, files=files, **kw)
