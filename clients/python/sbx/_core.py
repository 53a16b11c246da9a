"""What the sync and async clients share: request bodies, retry delays and
the parsing of streamed answers. No I/O here."""

from __future__ import annotations

import base64
import json
import os
import random
from typing import Any, Callable, Dict, List, Mapping, Optional, Union

from .errors import ProtocolError, SessionExpired
from .models import Execution, Logs, OutputMessage, Result

FileData = Union[bytes, str]
Callback = Optional[Callable[[OutputMessage], Any]]

DEFAULT_URL_ENV = "SBX_URL"
DEFAULT_TOKEN_ENV = "SBX_TOKEN"
NDJSON = "application/x-ndjson"

# The longest line of a streamed answer the client reads: the server caps
# a run's output (10 MiB by default) and sends it in chunks, so a longer
# line is not the API and is refused rather than held in memory.
MAX_LINE = 64 << 20


def duration(seconds: Optional[float]) -> Optional[str]:
    """Seconds as the duration text sbx takes ("1.5s")."""
    if seconds is None:
        return None
    if seconds <= 0:
        raise ValueError("a timeout must be positive, not %r" % seconds)
    # Fixed point, never "1e+06s", which Go's time.ParseDuration refuses.
    text = ("%.3f" % seconds).rstrip("0").rstrip(".")
    return "1ms" if text == "0" else text + "s"


def files_json(files: Optional[Mapping[str, FileData]]) -> List[Dict[str, str]]:
    out = []
    for path, data in (files or {}).items():
        raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        out.append({"path": path, "content_b64": base64.b64encode(raw).decode("ascii")})
    return out


def exec_body(code: Optional[str], argv: Optional[List[str]], profile: Optional[str],
              files: Optional[Mapping[str, FileData]], stdin: Optional[str], env: Optional[Mapping[str, str]],
              limits: Optional[Mapping[str, Any]], timeout: Optional[float], outputs: bool,
              metadata: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """The body of POST /v1/exec (README, "sbx serve")."""
    if (code is None) == (argv is None):
        raise ValueError("give code (Python source) or argv (a program and its arguments), not both")
    body: Dict[str, Any] = {"code": code} if code is not None else {"argv": list(argv or [])}
    if profile:
        body["profile"] = profile
    lim = dict(limits or {})
    if timeout is not None:
        lim["wall_time"] = duration(timeout)
    if lim:
        body["limits"] = lim
    if env:
        body["env"] = dict(env)
    if stdin:
        body["stdin"] = stdin
    if files:
        body["files"] = files_json(files)
    if outputs:
        body["outputs"] = True
    if metadata:
        body["metadata"] = dict(metadata)
    return body


def session_body(profile: Optional[str], timeout: Optional[float], idle_timeout: Optional[float],
                 limits: Optional[Mapping[str, Any]], env: Optional[Mapping[str, str]],
                 metadata: Optional[Mapping[str, Any]], from_snapshot: Optional[str]) -> Dict[str, Any]:
    """The body of POST /v1/sessions (issue 15). E2B's ``timeout`` is the
    sandbox's life: the session's TTL."""
    body: Dict[str, Any] = {}
    if profile:
        body["profile"] = profile
    if limits:
        body["limits"] = dict(limits)
    if env:
        body["env"] = dict(env)
    if timeout is not None:
        body["ttl"] = duration(timeout)
    if idle_timeout is not None:
        body["idle_timeout"] = duration(idle_timeout)
    if metadata:
        body["metadata"] = dict(metadata)
    if from_snapshot:
        body["from_snapshot"] = from_snapshot
    return body


def cell_body(code: str, timeout: Optional[float], env: Optional[Mapping[str, str]]) -> Dict[str, Any]:
    body: Dict[str, Any] = {"code": code}
    if timeout is not None:
        body["timeout"] = duration(timeout)
    if env:
        body["env"] = dict(env)
    return body


def retry_delay(attempt: int, retry_after: Optional[float], backoff: float, max_backoff: float) -> float:
    """How long to wait before retry ``attempt`` (0-based) of a 429 or 503:
    the server's Retry-After when it gave one, else exponential backoff
    with full jitter (so that clients turned away together do not come
    back together); capped at max_backoff either way."""
    if retry_after is not None:
        return min(max_backoff, retry_after)
    return min(max_backoff, random.uniform(0, backoff * (2 ** attempt)))


def parse_line(line: bytes) -> Optional[Dict[str, Any]]:
    line = line.strip()
    if not line:
        return None
    try:
        doc = json.loads(line)
    except ValueError as e:
        raise ProtocolError("a streamed line is not JSON: %s: %r" % (e, line[:200]))
    if not isinstance(doc, dict):
        raise ProtocolError("a streamed line is not a JSON object: %r" % line[:200])
    return doc


def _emit(cb: Callback, data: str, t_ms: Any, error: bool) -> None:
    if cb is not None:
        cb(OutputMessage(line=data, timestamp=int(t_ms or 0), error=error))


class ExecStream:
    """Folds the NDJSON lines of ``POST /v1/exec`` into a Result, calling
    the callbacks for each chunk as it arrives."""

    def __init__(self, on_stdout: Callback, on_stderr: Callback) -> None:
        self.on_stdout, self.on_stderr = on_stdout, on_stderr
        self.result: Optional[Result] = None

    def feed(self, doc: Dict[str, Any]) -> None:
        kind = doc.get("type")
        if kind == "stdout":
            _emit(self.on_stdout, doc.get("data", ""), doc.get("t_ms"), False)
        elif kind == "stderr":
            _emit(self.on_stderr, doc.get("data", ""), doc.get("t_ms"), True)
        elif kind == "result":
            self.result = Result.from_response(doc.get("result") or {})

    def finish(self) -> Result:
        if self.result is None:
            raise ProtocolError("the stream ended without its result line (the server or the connection failed)")
        return self.result


class CellStream:
    """Folds the NDJSON lines of a session's exec (issue 15: ``stdout``,
    ``stderr``, ``result``, ``error``, ``end``, keepalives) into an
    Execution. The ``end`` line's Execution is the truth when it has one;
    the chunks seen on the way are kept as its logs either way."""

    def __init__(self, on_stdout: Callback, on_stderr: Callback,
                 on_result: Optional[Callable[[Any], Any]] = None,
                 on_error: Optional[Callable[[Any], Any]] = None) -> None:
        self.on_stdout, self.on_stderr = on_stdout, on_stderr
        self.on_result, self.on_error = on_result, on_error
        self.logs = Logs()
        self.results: List[Dict[str, Any]] = []
        self.error: Optional[Dict[str, Any]] = None
        self.end: Optional[Dict[str, Any]] = None

    def feed(self, doc: Dict[str, Any]) -> None:
        from .models import ExecutionError, MimeResult

        kind = doc.get("type")
        if kind in ("stdout", "stderr"):
            data = str(doc.get("data", doc.get("text", "")))
            (self.logs.stdout if kind == "stdout" else self.logs.stderr).append(data)
            _emit(self.on_stdout if kind == "stdout" else self.on_stderr, data, doc.get("t_ms"), kind == "stderr")
        elif kind == "result":
            r = doc.get("result") if isinstance(doc.get("result"), dict) else doc.get("data") or {}
            self.results.append(r)
            if self.on_result:
                self.on_result(MimeResult.from_json(r))
        elif kind == "error":
            self.error = doc.get("error") if isinstance(doc.get("error"), dict) else doc
            if self.on_error:
                self.on_error(ExecutionError.from_json(self.error))
        elif kind == "end":
            ex = doc.get("execution")
            self.end = ex if isinstance(ex, dict) else {k: v for k, v in doc.items() if k != "type"}

    def finish(self) -> Execution:
        if self.end is None:
            raise ProtocolError("the cell's stream ended without its end line (the server or the connection failed)")
        if self.end.get("status") == "session_ended":
            # Unstreamed, the same is a 409 session_ended: the session is
            # over (its TTL, its CPU limit, a kill), not just this cell.
            raise SessionExpired("the session ended: %s" % self.end.get("message", ""), code="session_ended")
        raw = dict(self.end)
        raw.setdefault("results", self.results)
        if self.error is not None:
            raw.setdefault("error", self.error)
        logs = self.logs if (self.logs.stdout or self.logs.stderr) else None
        return Execution(raw, logs)


def env_url(url: Optional[str]) -> Optional[str]:
    return url or os.environ.get(DEFAULT_URL_ENV) or None


def env_token(token: Optional[str]) -> Optional[str]:
    return token if token is not None else (os.environ.get(DEFAULT_TOKEN_ENV) or None)
