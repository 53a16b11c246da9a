"""A ``run_python`` tool for models: its definition in OpenAI's and
Anthropic's tool-calling formats, and :func:`handle`, which runs a tool
call in a sandbox and returns what to show the model.

    tools = [sbx.tools.openai()]                  # or sbx.tools.anthropic()
    ...
    out = sbx.tools.handle(tool_call, sandbox)    # a str: stdout, error, results
    messages.append({"role": "tool", "tool_call_id": tool_call.id, "content": out.openai_content()})

The text stays within a budget (``max_chars``): long output keeps its head
and its tail, a traceback its last frames, and images travel as base64
blocks beside the text (``anthropic_content()``, ``openai_content()``),
within ``max_image_bytes`` in all.
"""

from __future__ import annotations

import base64
import json
from typing import Any, Dict, List, Optional, Tuple

from .errors import SessionsUnavailable
from .models import ExecutionError, Result

__all__ = ["NAME", "DESCRIPTION", "openai", "anthropic", "handle", "ahandle", "parse_call", "ToolOutput"]

NAME = "run_python"
DESCRIPTION = ("Run Python 3 code in a sandbox and see its output. The workspace is the current directory; "
               "variables persist between calls when the sandbox is a session. The last expression's value, "
               "printed output, errors and matplotlib figures are returned. No network unless the profile allows it.")

_SCHEMA = {
    "type": "object",
    "properties": {
        "code": {"type": "string", "description": "The Python code to run."},
    },
    "required": ["code"],
    "additionalProperties": False,
}


def openai() -> Dict[str, Any]:
    """The tool definition in OpenAI's format (``tools=[...]`` of Chat Completions)."""
    return {"type": "function", "function": {"name": NAME, "description": DESCRIPTION, "parameters": _SCHEMA}}


def anthropic() -> Dict[str, Any]:
    """The tool definition in Anthropic's format (``tools=[...]`` of Messages)."""
    return {"name": NAME, "description": DESCRIPTION, "input_schema": _SCHEMA}


def _get(obj: Any, key: str) -> Any:
    if isinstance(obj, dict):
        return obj.get(key)
    return getattr(obj, key, None)


def parse_call(call: Any) -> Tuple[str, str]:
    """``(call_id, code)`` of a tool call in either format, as a dict or an
    SDK object: OpenAI's ``{"id", "function": {"name", "arguments": "<json>"}}``
    or Anthropic's ``{"type": "tool_use", "id", "name", "input": {"code"}}``."""
    fn = _get(call, "function")
    if fn is not None:
        name, args = _get(fn, "name"), _get(fn, "arguments")
    else:
        name, args = _get(call, "name"), _get(call, "input")
        if args is None:
            args = _get(call, "arguments")
    if name != NAME:
        raise ValueError("tool %r: this handler runs %r" % (name, NAME))
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError as e:
            raise ValueError("tool %s: arguments are not JSON: %s" % (NAME, e)) from e
    if not isinstance(args, dict) or not isinstance(args.get("code"), str):
        raise ValueError("tool %s: want arguments {\"code\": \"...\"}" % NAME)
    return str(_get(call, "id") or ""), args["code"]


class ToolOutput(str):
    """What to show the model: the text (this str itself), and the images
    (``images``: ``(mime, base64)`` pairs) to send beside it."""

    images: List[Tuple[str, str]]

    def __new__(cls, text: str, images: Optional[List[Tuple[str, str]]] = None) -> "ToolOutput":
        self = super().__new__(cls, text)
        self.images = list(images or [])
        return self

    def anthropic_content(self) -> List[Dict[str, Any]]:
        """Content blocks for a ``tool_result``: the text, then each image."""
        blocks: List[Dict[str, Any]] = [{"type": "text", "text": str(self)}]
        for mime, data in self.images:
            blocks.append({"type": "image", "source": {"type": "base64", "media_type": mime, "data": data}})
        return blocks

    def openai_content(self) -> Any:
        """The text alone, or content parts with the images as data URLs."""
        if not self.images:
            return str(self)
        parts: List[Dict[str, Any]] = [{"type": "text", "text": str(self)}]
        for mime, data in self.images:
            parts.append({"type": "image_url", "image_url": {"url": "data:%s;base64,%s" % (mime, data)}})
        return parts


def _clip(text: str, budget: int) -> str:
    if len(text) <= budget:
        return text
    head = budget * 2 // 3
    tail = budget - head
    return "%s\n[... %d characters elided ...]\n%s" % (text[:head], len(text) - head - tail, text[-tail:] if tail else "")


def _error_text(err: ExecutionError, max_frames: int) -> str:
    if err.frames:
        frames = err.frames[-max_frames:]
        lines = ["Traceback (most recent call last, the last %d frames):" % len(frames)]
        for f in frames:
            lines.append('  File "%s", line %d, in %s' % (f.file, f.line, f.function))
            if f.code:
                lines.append("    " + f.code.strip())
        lines.append(str(err))
        return "\n".join(lines)
    tb = err.traceback.strip().splitlines()
    return "\n".join(tb[-2 * max_frames - 1:]) if tb else str(err)


def render(outcome: Any, *, max_chars: int = 8000, max_image_bytes: int = 1 << 20, max_frames: int = 3) -> ToolOutput:
    """The model-ready text of an Execution or a Result, within the budgets."""
    parts: List[str] = []
    images: List[Tuple[str, str]] = []
    status = outcome.status
    if isinstance(outcome, Result):
        results = outcome.results
        err = outcome.error
        parts.append("status: %s (%s)" % (status, outcome.message))
    else:
        results = outcome.results
        err = outcome.error
        parts.append("status: %s" % status + (" (the interpreter was restarted: state lost)" if outcome.state_lost else ""))
    stdout, stderr = outcome.stdout, outcome.stderr
    budget = max(200, max_chars - 600)
    if stdout:
        parts.append("stdout:\n" + _clip(stdout, budget * 2 // 3))
    if err is not None:
        parts.append("error:\n" + _error_text(err, max_frames))
    elif stderr:
        parts.append("stderr:\n" + _clip(stderr, budget // 3))
    used = 0
    for i, r in enumerate(results):
        label = "result" if r.is_main_result else "display %d" % i
        for fmt, mime in (("png", "image/png"), ("jpeg", "image/jpeg")):
            data = getattr(r, fmt)
            if data:
                size = len(data) * 3 // 4
                if used + size <= max_image_bytes:
                    images.append((mime, data))
                    used += size
                    parts.append("%s: an image (%s, %d bytes), attached" % (label, mime, size))
                else:
                    parts.append("%s: an image (%s, %d bytes), not attached: past the image budget" % (label, mime, size))
                break
        else:
            if r.text is not None:
                parts.append("%s: %s" % (label, _clip(r.text, budget // 4)))
    if isinstance(outcome, Result):
        for name, data in sorted(outcome.outputs.items()):
            if name.lower().endswith(".png") and data[:8] == b"\x89PNG\r\n\x1a\n" and used + len(data) <= max_image_bytes:
                images.append(("image/png", base64.b64encode(data).decode("ascii")))
                used += len(data)
                parts.append("file %s: an image, attached" % name)
    files = outcome.files
    if files:
        parts.append("files: " + ", ".join("%s (%s, %d bytes)" % (f.path, f.change or "present", f.size)
                                          for f in files[:20]) + (" and %d more" % (len(files) - 20) if len(files) > 20 else ""))
    return ToolOutput(_clip("\n".join(parts), max_chars), images)


def handle(call: Any, sandbox: Any, *, timeout: Optional[float] = None, **budget: Any) -> ToolOutput:
    """Run a ``run_python`` tool call in ``sandbox`` and return what to show
    the model. A server Sandbox runs it as a session cell (state kept); the
    local transport, or a server without sessions, as a one-shot run."""
    _, code = parse_call(call)
    outcome: Any
    if sandbox.is_local:
        outcome = sandbox.run(code, timeout=timeout)
    else:
        try:
            outcome = sandbox.run_code(code, timeout=timeout)
        except SessionsUnavailable:
            outcome = sandbox.run(code, timeout=timeout)
    return render(outcome, **budget)


async def ahandle(call: Any, sandbox: Any, *, timeout: Optional[float] = None, **budget: Any) -> ToolOutput:
    """:func:`handle` for an :class:`sbx.AsyncSandbox`."""
    _, code = parse_call(call)
    if sandbox._transport is None:
        outcome = await sandbox.run(code, timeout=timeout)
    else:
        try:
            outcome = await sandbox.run_code(code, timeout=timeout)
        except SessionsUnavailable:
            outcome = await sandbox.run(code, timeout=timeout)
    return render(outcome, **budget)


