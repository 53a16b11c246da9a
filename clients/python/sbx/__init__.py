"""sbx: run untrusted Python in a sandbox, from Python.

    import sbx

    res = sbx.run("print(6 * 7)")                 # one-shot: the local sbx, or $SBX_URL
    print(res.status, res.stdout)

    with sbx.Sandbox.create(url="http://127.0.0.1:8377", token="...") as sandbox:
        sandbox.run_code("x = 41")                 # a session: state lasts
        print(sandbox.run_code("x + 1").text)      # 42

Names follow E2B's code interpreter where they overlap (``Sandbox.create``,
``run_code``, ``Execution``, ``files``, ``kill``). ``AsyncSandbox`` (in
``sbx.aio``, needs httpx) is the async twin. ``sbx.tools`` gives a model a
``run_python`` tool.
"""

from .errors import (AuthError, ConnectionFailed, InvalidRequest, LimitExceeded, LocalRunError, NotFound,
                     PayloadTooLarge, ProtocolError, RateLimited, RequestTimeout, SandboxError, ServerError,
                     ServerUnavailable, SessionBusy, SessionExpired, SessionMisdirected, SessionsUnavailable,
                     SetupError, TimeoutExceeded)
from .models import Execution, ExecutionError, FileEntry, Frame, Logs, MimeResult, OutputMessage, Result
from .sandbox import Files, Sandbox, run

__version__ = "0.1.0"

__all__ = [
    "Sandbox", "Files", "run", "AsyncSandbox",
    "Result", "Execution", "ExecutionError", "Frame", "Logs", "MimeResult", "OutputMessage", "FileEntry",
    "SandboxError", "AuthError", "ConnectionFailed", "InvalidRequest", "LimitExceeded", "LocalRunError",
    "NotFound", "PayloadTooLarge", "ProtocolError", "RateLimited", "RequestTimeout", "ServerError",
    "ServerUnavailable", "SessionBusy", "SessionExpired", "SessionMisdirected", "SessionsUnavailable", "SetupError",
    "TimeoutExceeded",
]


def __getattr__(name: str):
    # AsyncSandbox needs httpx; importing sbx must not.
    if name == "AsyncSandbox":
        from .aio import AsyncSandbox

        return AsyncSandbox
    if name == "tools":
        from . import tools

        return tools
    raise AttributeError("module 'sbx' has no attribute %r" % name)
