"""Typed errors. Every error the client raises is a :class:`SandboxError`.

What the payload did is not an error: a run that raised, timed out or hit a
limit still returns its Result or Execution, whose ``status`` (and
``error``) say what happened. ``Result.raise_for_status()`` turns a limit or
a failed set-up into :class:`LimitExceeded` or :class:`SetupError` for
callers who prefer exceptions.
"""

from __future__ import annotations

import email.utils
import json
import time
from typing import Any, Mapping, Optional

__all__ = [
    "SandboxError",
    "ConnectionFailed",
    "InvalidRequest",
    "AuthError",
    "NotFound",
    "SessionsUnavailable",
    "SessionExpired",
    "SessionBusy",
    "SessionMisdirected",
    "RequestTimeout",
    "PayloadTooLarge",
    "RateLimited",
    "ServerUnavailable",
    "ServerError",
    "ProtocolError",
    "LocalRunError",
    "LimitExceeded",
    "TimeoutExceeded",
    "SetupError",
]


class SandboxError(Exception):
    """The base of every error of the sbx client.

    ``status`` is the HTTP status (None when there was no answer), ``code``
    the server's error code (``{"error": {"code", "message"}}``) and
    ``request_id`` the server's ``X-Request-Id`` for its audit log.
    """

    def __init__(self, message: str, *, status: Optional[int] = None, code: Optional[str] = None,
                 request_id: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.request_id = request_id


class ConnectionFailed(SandboxError):
    """The server could not be reached, or the connection broke."""


class InvalidRequest(SandboxError):
    """400: the server refused the request; the message names the field."""


class AuthError(SandboxError):
    """401 or 403: no token, or a token the server does not accept."""


class NotFound(SandboxError):
    """404 on something other than a session."""


class SessionsUnavailable(SandboxError):
    """Sessions need ``sbx serve`` with sessions: the local transport has
    none, and a server without them answers 404 on ``/v1/sessions``."""


class SessionExpired(SandboxError):
    """The session is gone: deleted, or destroyed at its TTL or idle timeout."""


class SessionBusy(SandboxError):
    """409: the session is running another cell."""


class SessionMisdirected(SandboxError):
    """421: the session lives on another node than the one that answered.

    A session lives on the ``sbx serve`` that created it, whose name
    (``--node-name``) starts its id (``NODE-`` and 24 hex digits). ``node``
    is that node, ``this_node`` the one that answered: the load balancer
    did not route the request by the id (docs/deploy.md), or ``node`` is
    down. Not :class:`SessionExpired`: the session may still exist there.
    """

    def __init__(self, message: str, *, node: Optional[str] = None, this_node: Optional[str] = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.node = node
        self.this_node = this_node


class RequestTimeout(SandboxError):
    """408: the request body did not arrive within the server's ``--body-timeout``."""


class PayloadTooLarge(SandboxError):
    """413: the request body is past the server's ``--max-body``."""


class RateLimited(SandboxError):
    """429: the server's workers and queue are full, after every retry.

    ``retry_after`` is the server's ``Retry-After`` in seconds (None if it gave none).
    """

    def __init__(self, message: str, *, retry_after: Optional[float] = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.retry_after = retry_after


class ServerUnavailable(RateLimited):
    """503: the server is draining (or not ready), after every retry."""


class ServerError(SandboxError):
    """5xx other than 503: the server failed."""


class ProtocolError(SandboxError):
    """The server's answer is not what the API says (not JSON, a cut stream)."""


class LocalRunError(SandboxError):
    """The local ``sbx`` binary could not be run at all (not found, not executable)."""


class LimitExceeded(SandboxError):
    """A run was ended by one of its limits (``Result.raise_for_status()``).

    ``limit`` is the Result's status (``memory_limit``, ``pids_limit``,
    ``cpu_limit``, ``output_limit``, ``timeout``) and ``result`` the Result
    or Execution itself.
    """

    def __init__(self, message: str, *, limit: str, result: Any = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.limit = limit
        self.result = result


class TimeoutExceeded(LimitExceeded):
    """The run's wall-clock limit ended it (status ``timeout``)."""


class SetupError(SandboxError):
    """sbx could not build the sandbox (status ``setup_error``): the code never ran."""

    def __init__(self, message: str, *, result: Any = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.result = result


def parse_retry_after(value: Optional[str], now: Optional[float] = None) -> Optional[float]:
    """Retry-After as seconds: delta-seconds or an HTTP date (RFC 9110 10.2.3)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def _session_path(path: str) -> bool:
    return path == "/v1/sessions" or path.startswith("/v1/sessions/") or path.startswith("/v1/sessions?")


def error_from_response(status: int, body: bytes, headers: Mapping[str, str], method: str, path: str) -> SandboxError:
    """The typed error for a non-2xx answer of ``sbx serve``."""
    code: Optional[str] = None
    message = ""
    is_api_error = False
    try:
        doc = json.loads(body.decode("utf-8", "replace")) if body else None
        if isinstance(doc, dict) and isinstance(doc.get("error"), dict):
            code = doc["error"].get("code")
            message = str(doc["error"].get("message", ""))
            is_api_error = True
    except ValueError:
        pass
    if not message:
        message = body[:200].decode("utf-8", "replace").strip() or "HTTP %d" % status
    rid = headers.get("X-Request-Id")
    where = "%s %s: %d" % (method, path.split("?")[0], status)
    kw: dict = {"status": status, "code": code, "request_id": rid}
    text = "%s %s" % (where, message)
    retry_after = parse_retry_after(headers.get("Retry-After"))
    if status == 400:
        return InvalidRequest(text, **kw)
    if status in (401, 403):
        return AuthError(text, **kw)
    bare = path.split("?")[0]
    if status in (404, 405) and _session_path(path) and not is_api_error:
        # net/http's mux answers a route it does not have with a plain
        # "404 page not found": this server was built without sessions,
        # or without this one endpoint of them.
        if bare == "/v1/sessions":
            return SessionsUnavailable(
                "%s: this sbx serve has no sessions (run_code, files, kill need a server "
                "with /v1/sessions; one-shot runs work: Sandbox.run, sbx.run)" % where, **kw)
        return SessionsUnavailable("%s: this sbx serve's sessions have no such endpoint" % where, **kw)
    if code == "session_busy":
        return SessionBusy(text, **kw)
    if status == 421:
        err = doc["error"] if is_api_error else {}
        node, this_node = err.get("node"), err.get("this_node")
        return SessionMisdirected(text, node=node if isinstance(node, str) else None,
                                  this_node=this_node if isinstance(this_node, str) else None, **kw)
    if status == 410 or code == "session_ended" or (status == 404 and _session_path(path) and bare != "/v1/sessions"
                                                     and "/files" not in bare):
        return SessionExpired(text, **kw)
    if status == 404:
        return NotFound(text, **kw)
    if status == 408:
        return RequestTimeout(text, **kw)
    if status == 409:
        return SessionBusy(text, **kw)
    if status == 413:
        return PayloadTooLarge(text, **kw)
    if status == 429:
        return RateLimited(text, retry_after=retry_after, **kw)
    if status == 503:
        return ServerUnavailable(text, retry_after=retry_after, **kw)
    if status >= 500:
        return ServerError(text, **kw)
    return SandboxError(text, **kw)
