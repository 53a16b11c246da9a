"""What the client returns: the raw sbx Result, and E2B-shaped Executions.

Names follow E2B's code interpreter where they overlap (``Execution``,
``.logs.stdout``, ``.results[i].png``, ``.error.traceback``), so that
switching is a rename. What sbx adds (``status``, ``usage``, ``limits``,
``network``, ``files`` with sha256, the raw ``result``) is beside them.
Every object keeps the JSON it came from in ``raw``: fields the server adds
later are there before the client names them.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from .errors import LimitExceeded, SetupError, TimeoutExceeded

__all__ = [
    "OutputMessage",
    "Logs",
    "Frame",
    "ExecutionError",
    "MimeResult",
    "FileEntry",
    "Result",
    "Execution",
    "LIMIT_STATUSES",
]

# The Result statuses that mean a limit ended the run (docs/DESIGN.md, Result).
LIMIT_STATUSES = ("timeout", "cpu_limit", "memory_limit", "pids_limit", "output_limit")

# MIME bundle keys of a rich result, as issue 15 names them, and the MIME
# types they may arrive as (a Jupyter-style "data" object).
_MIME = {
    "text": "text/plain",
    "html": "text/html",
    "markdown": "text/markdown",
    "svg": "image/svg+xml",
    "png": "image/png",
    "jpeg": "image/jpeg",
    "pdf": "application/pdf",
    "latex": "text/latex",
    "json": "application/json",
    "javascript": "application/javascript",
}


@dataclass
class OutputMessage:
    """One chunk of output, as a streaming callback gets it (E2B's name).

    ``str(msg)`` is the text; ``timestamp`` is ms since the run started
    (the server's ``t_ms``); ``error`` is True for stderr.
    """

    line: str
    timestamp: int = 0
    error: bool = False

    def __str__(self) -> str:
        return self.line


@dataclass
class Logs:
    """The output as chunks, in the order they were read (E2B's ``Logs``)."""

    stdout: List[str] = field(default_factory=list)
    stderr: List[str] = field(default_factory=list)


@dataclass
class Frame:
    """One traceback frame, trimmed to the cell's own code."""

    file: str = ""
    line: int = 0
    function: str = ""
    code: str = ""

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Frame":
        return cls(file=str(d.get("file", "")), line=int(d.get("line") or 0),
                   function=str(d.get("function", "")), code=str(d.get("code") or ""))


@dataclass
class ExecutionError:
    """An uncaught exception: ``name`` (``ZeroDivisionError``), ``value``
    (its message), ``traceback`` (the text Python prints, E2B's string) and
    ``frames`` (the structured frames sbx gives)."""

    name: str
    value: str
    traceback: str = ""
    frames: List[Frame] = field(default_factory=list)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Optional[Dict[str, Any]]) -> Optional["ExecutionError"]:
        if not d:
            return None
        name, value = str(d.get("name", "")), str(d.get("value", ""))
        tb = d.get("traceback")
        frames: List[Frame] = []
        if isinstance(tb, list):
            frames = [Frame.from_json(f) for f in tb if isinstance(f, dict)]
            text = _format_traceback(frames, name, value)
        else:
            text = str(tb or "")
        return cls(name=name, value=value, traceback=text, frames=frames, raw=d)

    def __str__(self) -> str:
        return "%s: %s" % (self.name, self.value) if self.value else self.name


def _format_traceback(frames: List[Frame], name: str, value: str) -> str:
    lines = ["Traceback (most recent call last):"]
    for f in frames:
        lines.append('  File "%s", line %d, in %s' % (f.file, f.line, f.function))
        if f.code:
            lines.append("    " + f.code.strip())
    lines.append("%s: %s" % (name, value) if value else name)
    return "\n".join(lines)


@dataclass
class MimeResult:
    """One rich result: the last expression's value (``is_main_result``) or
    a ``display()``, as a MIME bundle. E2B calls this class ``Result``; in
    sbx that name is the run's Result. Binary formats (``png``, ``jpeg``,
    ``pdf``) are base64 text, as in E2B; ``data("png")`` decodes them."""

    text: Optional[str] = None
    html: Optional[str] = None
    markdown: Optional[str] = None
    svg: Optional[str] = None
    png: Optional[str] = None
    jpeg: Optional[str] = None
    pdf: Optional[str] = None
    latex: Optional[str] = None
    json: Optional[Any] = None
    javascript: Optional[str] = None
    is_main_result: bool = False
    path: Optional[str] = None
    sha256: Optional[str] = None
    #: The items too large to be inline (over 1 MiB in a session), by
    #: format: each was written to a workspace file (``path``, ``size``,
    #: ``sha256``), fetched with ``Session.files.read(path)``.
    files: Dict[str, "FileEntry"] = field(default_factory=dict)
    extra: Dict[str, Any] = field(default_factory=dict)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "MimeResult":
        bundle = dict(d)
        data = bundle.pop("data", None)
        if isinstance(data, dict):  # {"data": {"image/png": ...}}
            by_type = {v: k for k, v in _MIME.items()}
            for mime, value in data.items():
                bundle.setdefault(by_type.get(mime, mime), value)
        kw: Dict[str, Any] = {}
        for key in _MIME:
            if key in bundle:
                kw[key] = bundle.pop(key)
        files = bundle.get("files")
        files = {str(k): FileEntry.from_json(v) for k, v in files.items() if isinstance(v, dict)} if isinstance(files, dict) else {}
        extra = {k: v for k, v in bundle.items() if k not in ("is_main_result", "path", "sha256", "type", "files")}
        return cls(is_main_result=bool(bundle.get("is_main_result", False)), path=bundle.get("path"),
                   sha256=bundle.get("sha256"), files=files, extra=extra, raw=d, **kw)

    def formats(self) -> List[str]:
        """The formats this result has, E2B's ``formats()``."""
        return [k for k in _MIME if getattr(self, k) is not None]

    def data(self, fmt: str) -> bytes:
        """The bytes of one format: base64 decoded for png, jpeg and pdf."""
        value = getattr(self, fmt)
        if value is None:
            raise KeyError("this result has no %s" % fmt)
        if fmt in ("png", "jpeg", "pdf"):
            return base64.b64decode(value)
        return value.encode() if isinstance(value, str) else bytes(value)

    def __str__(self) -> str:
        return self.text or ""


@dataclass
class FileEntry:
    """A workspace file: its path, size and sha256, and for a run's
    ``files`` what the run did to it (``change``: created, modified,
    deleted)."""

    path: str
    size: int = 0
    sha256: Optional[str] = None
    change: Optional[str] = None
    kind: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "FileEntry":
        return cls(path=str(d.get("path", "")), size=int(d.get("size") or 0), sha256=d.get("sha256"),
                   change=d.get("change"), kind=d.get("kind"), raw=d)


def _files(v: Any) -> List[FileEntry]:
    return [FileEntry.from_json(f) for f in (v or []) if isinstance(f, dict)]


def _raise_for(status: str, message: str, obj: Any) -> None:
    if status == "setup_error":
        raise SetupError("sbx could not build the sandbox: %s" % message, result=obj)
    if status == "timeout":
        raise TimeoutExceeded("the run hit its wall-clock limit: %s" % message, limit=status, result=obj)
    if status in LIMIT_STATUSES:
        raise LimitExceeded("the run hit a limit (%s): %s" % (status, message), limit=status, result=obj)


class Result:
    """The Result of one run: the object ``sbx exec --json`` prints and
    ``POST /v1/exec`` answers (docs/DESIGN.md, "Result").

    The common fields are attributes; ``raw`` is the whole JSON object.
    ``outputs`` maps each file the run created or changed to its bytes,
    when they were asked for. ``ok`` is ``status == "ok"``.
    """

    def __init__(self, raw: Dict[str, Any], outputs: Optional[Dict[str, bytes]] = None) -> None:
        self.raw = raw
        self.outputs: Dict[str, bytes] = outputs or {}

    @classmethod
    def from_response(cls, doc: Dict[str, Any]) -> "Result":
        """A Result from the server's answer (outputs inline, base64)."""
        outputs: Dict[str, bytes] = {}
        for o in doc.get("outputs") or []:
            outputs[o["path"]] = base64.b64decode(o.get("content_b64") or "")
        return cls(doc, outputs)

    def _get(self, key: str, default: Any = None) -> Any:
        v = self.raw.get(key, default)
        return default if v is None else v

    id = property(lambda self: self._get("id", ""))
    request_id = property(lambda self: self.raw.get("request_id"))
    profile = property(lambda self: self._get("profile", ""))
    status = property(lambda self: self._get("status", ""))
    exit_code = property(lambda self: self.raw.get("exit_code"))
    signal = property(lambda self: self.raw.get("signal"))
    message = property(lambda self: self._get("message", ""))
    stdout = property(lambda self: self._get("stdout", ""))
    stderr = property(lambda self: self._get("stderr", ""))
    stdout_truncated = property(lambda self: bool(self.raw.get("stdout_truncated")))
    stderr_truncated = property(lambda self: bool(self.raw.get("stderr_truncated")))
    usage = property(lambda self: self._get("usage", {}))
    limits = property(lambda self: self._get("limits", {}))
    layers = property(lambda self: self._get("layers", {}))
    network = property(lambda self: self._get("network", []))
    network_summary = property(lambda self: self.raw.get("network_summary"))
    seccomp_denials = property(lambda self: self.raw.get("seccomp_denials"))
    warnings = property(lambda self: self._get("warnings", []))

    @property
    def files(self) -> List[FileEntry]:
        """Workspace entries the run created, modified or deleted, with sha256."""
        return _files(self.raw.get("files"))

    @property
    def inputs(self) -> List[FileEntry]:
        """Every file streamed in, with its sha256."""
        return _files(self.raw.get("inputs"))

    @property
    def error(self) -> Optional[ExecutionError]:
        """The uncaught exception of a Python payload, when sbx captured one."""
        return ExecutionError.from_json(self.raw.get("error"))

    @property
    def results(self) -> List[MimeResult]:
        """The figures a script left open or ``plt.show()``ed, as PNGs, when
        the profile sets ``capture_figures`` (``data`` does)."""
        return [MimeResult.from_json(r) for r in self.raw.get("results") or [] if isinstance(r, dict)]

    results_truncated = property(lambda self: bool(self.raw.get("results_truncated")))

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def raise_for_status(self) -> "Result":
        """Raise :class:`SetupError` or :class:`LimitExceeded` when sbx could
        not run the code or a limit ended it; else return self. A payload
        that exited nonzero or raised is not a client error: see
        ``status``, ``exit_code`` and ``error``."""
        _raise_for(self.status, self.message, self)
        return self

    def __repr__(self) -> str:
        return "Result(status=%r, exit_code=%r, message=%r)" % (self.status, self.exit_code, self.message)


class Execution:
    """One cell's run in a session: E2B's ``Execution``, plus sbx's fields.

    ``results``, ``logs``, ``error``, ``execution_count`` and ``text`` are
    E2B's. ``status``, ``usage``, ``limits``, ``network``, ``files`` and
    ``state_lost`` are sbx's, and ``result`` is the raw JSON.
    """

    def __init__(self, raw: Dict[str, Any], logs: Optional[Logs] = None) -> None:
        self.raw = raw
        self.result = raw
        self.results: List[MimeResult] = [MimeResult.from_json(r) for r in raw.get("results") or []
                                          if isinstance(r, dict)]
        self.error: Optional[ExecutionError] = ExecutionError.from_json(raw.get("error"))
        self.execution_count: Optional[int] = raw.get("execution_count")
        self.logs = logs if logs is not None else _logs_of(raw)

    @property
    def text(self) -> Optional[str]:
        """The main result's text (the cell's last expression), as E2B."""
        for r in self.results:
            if r.is_main_result:
                return r.text
        return None

    status = property(lambda self: self.raw.get("status") or ("error" if self.error else "ok"))
    usage = property(lambda self: self.raw.get("usage") or {})
    limits = property(lambda self: self.raw.get("limits") or {})
    network = property(lambda self: self.raw.get("network") or [])
    state_lost = property(lambda self: bool(self.raw.get("state_lost")))
    message = property(lambda self: self.raw.get("message") or "")
    results_truncated = property(lambda self: bool(self.raw.get("results_truncated")))
    results_truncated_reason = property(lambda self: self.raw.get("results_truncated_reason") or "")

    @property
    def files(self) -> List[FileEntry]:
        return _files(self.raw.get("files"))

    @property
    def stdout(self) -> str:
        return "".join(self.logs.stdout)

    @property
    def stderr(self) -> str:
        return "".join(self.logs.stderr)

    def raise_for_status(self) -> "Execution":
        """Raise :class:`TimeoutExceeded` for a cell past its timeout and
        :class:`LimitExceeded` for one whose interpreter died under it
        (``killed``: a memory or pids limit; ``state_lost`` says the state
        went with it). A cell that raised is ``error``, not an exception."""
        status = str(self.raw.get("status") or "")
        if status == "killed":
            raise LimitExceeded("the cell's interpreter was killed: %s" % self.message, limit=status, result=self)
        _raise_for(status, self.message, self)
        return self

    def __repr__(self) -> str:
        return "Execution(execution_count=%r, results=%d, error=%r, status=%r)" % (
            self.execution_count, len(self.results), self.error, self.status)


def _logs_of(raw: Dict[str, Any]) -> Logs:
    """Chunks from an Execution's ordered ``logs`` (tagged by stream), else
    its ``stdout``/``stderr`` text as one chunk each."""
    logs = Logs()
    chunks = raw.get("logs")
    if isinstance(chunks, list) and chunks:
        for c in chunks:
            if not isinstance(c, dict):
                continue
            stream = c.get("stream") or c.get("type") or c.get("name")
            data = c.get("data", c.get("text", c.get("line", "")))
            (logs.stderr if stream == "stderr" else logs.stdout).append(str(data))
        return logs
    if raw.get("stdout"):
        logs.stdout.append(raw["stdout"])
    if raw.get("stderr"):
        logs.stderr.append(raw["stderr"])
    return logs
