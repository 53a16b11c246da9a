"""The sync HTTP transport: http.client, the standard library only.

One connection per request (``sbx serve`` runs take seconds; a pool of
keep-alive connections would save little and complicate retries). 429 and
503 are retried with backoff that follows Retry-After; nothing else is:
a POST that reached a worker may have run.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import time
import urllib.parse
from typing import Any, Callable, Dict, Iterator, Mapping, Optional, Tuple

from ._core import MAX_LINE, NDJSON, parse_line, retry_delay
from .errors import ConnectionFailed, ProtocolError, error_from_response, parse_retry_after

RetryHook = Optional[Callable[[int, int, float], Any]]

USER_AGENT = "sbx-python/0.1"


class _UnixConnection(http.client.HTTPConnection):
    """HTTP over a Unix socket (``sbx serve --listen unix:/path``)."""

    def __init__(self, path: str, timeout: Optional[float]) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if self.timeout is not None:
            s.settimeout(self.timeout)
        s.connect(self._path)
        self.sock = s


class HTTPTransport:
    """Requests to one ``sbx serve``: ``http://HOST:PORT``, ``https://...``
    or ``unix:/path``."""

    def __init__(self, url: str, token: Optional[str], *, request_timeout: Optional[float] = None,
                 connect_timeout: float = 10.0, max_retries: int = 5, backoff: float = 0.5,
                 max_backoff: float = 30.0, on_retry: RetryHook = None) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.request_timeout = request_timeout
        self.connect_timeout = connect_timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.on_retry = on_retry
        if self.url.startswith("unix:"):
            self._unix: Optional[str] = self.url[len("unix:"):]
            self._scheme, self._host, self._base = "http", "localhost", ""
        else:
            self._unix = None
            u = urllib.parse.urlsplit(self.url)
            if u.scheme not in ("http", "https") or not u.netloc:
                raise ValueError("url %r: want http://HOST:PORT, https://HOST[:PORT] or unix:/PATH" % url)
            self._scheme, self._host, self._base = u.scheme, u.netloc, u.path.rstrip("/")

    def _connection(self) -> http.client.HTTPConnection:
        if self._unix is not None:
            return _UnixConnection(self._unix, self.connect_timeout)
        if self._scheme == "https":
            return http.client.HTTPSConnection(self._host, timeout=self.connect_timeout,
                                               context=ssl.create_default_context())
        return http.client.HTTPConnection(self._host, timeout=self.connect_timeout)

    def headers(self, accept: str, content_type: Optional[str]) -> Dict[str, str]:
        h = {"Accept": accept, "User-Agent": USER_AGENT}
        if content_type:
            h["Content-Type"] = content_type
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        return h

    def _open(self, method: str, path: str, body: Optional[bytes], accept: str,
              content_type: Optional[str]) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Send one request, retrying 429 and 503; return the open 2xx answer."""
        attempt = 0
        while True:
            conn = self._connection()
            try:
                conn.request(method, self._base + path, body=body, headers=self.headers(accept, content_type))
                if conn.sock is not None:
                    # The connect had its own timeout; reading waits for the
                    # run, which may take as long as its wall-clock limit.
                    conn.sock.settimeout(self.request_timeout)
                resp = conn.getresponse()
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                raise ConnectionFailed("%s %s: %s: %s" % (method, path, type(e).__name__, e)) from e
            if 200 <= resp.status < 300:
                return conn, resp
            try:
                data = resp.read(1 << 20)
            except (OSError, http.client.HTTPException):
                data = b""
            finally:
                conn.close()
            hdrs = {k: v for k, v in resp.getheaders()}
            if resp.status in (429, 503) and attempt < self.max_retries:
                delay = retry_delay(attempt, parse_retry_after(hdrs.get("Retry-After")), self.backoff, self.max_backoff)
                if self.on_retry is not None:
                    self.on_retry(attempt + 1, resp.status, delay)
                time.sleep(delay)
                attempt += 1
                continue
            raise error_from_response(resp.status, data, hdrs, method, path)

    def call(self, method: str, path: str, *, json_body: Any = None, data: Optional[bytes] = None,
             accept: str = "application/json") -> Tuple[bytes, Mapping[str, str]]:
        """One request; the whole 2xx body and its headers."""
        body, ctype = _body(json_body, data)
        conn, resp = self._open(method, path, body, accept, ctype)
        try:
            return resp.read(), {k: v for k, v in resp.getheaders()}
        except (OSError, http.client.HTTPException) as e:
            raise ConnectionFailed("%s %s: reading the answer: %s" % (method, path, e)) from e
        finally:
            conn.close()

    def call_json(self, method: str, path: str, *, json_body: Any = None, data: Optional[bytes] = None) -> Any:
        raw, headers = self.call(method, path, json_body=json_body, data=data)
        if not raw.strip():
            return {}
        try:
            return json.loads(raw)
        except ValueError as e:
            raise ProtocolError("%s %s: the answer is not JSON: %s" % (method, path, e),
                                request_id=headers.get("X-Request-Id")) from e

    def stream(self, method: str, path: str, *, json_body: Any = None) -> Iterator[Dict[str, Any]]:
        """One request answered as NDJSON: each line, parsed, as it arrives."""
        body, ctype = _body(json_body, None)
        conn, resp = self._open(method, path, body, NDJSON, ctype)
        try:
            if NDJSON not in (resp.getheader("Content-Type") or ""):
                # A server may answer the whole object instead of a stream.
                doc = json.loads(resp.read())
                yield {"type": "whole", "body": doc}
                return
            while True:
                try:
                    line = resp.readline(MAX_LINE + 1)
                except (OSError, http.client.HTTPException) as e:
                    raise ConnectionFailed("%s %s: the stream broke: %s" % (method, path, e)) from e
                if not line:
                    return
                if len(line) > MAX_LINE:
                    raise ProtocolError("%s %s: a streamed line is longer than %d bytes" % (method, path, MAX_LINE))
                doc = parse_line(line)
                if doc is not None:
                    yield doc
        except ValueError as e:
            raise ProtocolError("%s %s: the answer is not JSON: %s" % (method, path, e)) from e
        finally:
            conn.close()


def _body(json_body: Any, data: Optional[bytes]) -> Tuple[Optional[bytes], Optional[str]]:
    if data is not None:
        return data, "application/octet-stream"
    if json_body is not None:
        return json.dumps(json_body).encode("utf-8"), "application/json"
    return None, None
