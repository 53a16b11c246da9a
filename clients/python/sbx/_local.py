"""The local transport: the ``sbx`` binary of this host, one process per
run (``sbx exec --json``), for one-shot runs with no server.

What every hand-written wrapper got wrong is done once here: the code goes
in a temp file (``-c`` hits the kernel's 128 KiB limit on one argument),
the inputs in a temp input dir (no ``SRC:DEST`` parsing of names with a
colon), each call gets its own output dir, and a run that printed no JSON
(sbx failed before it had a Result: a bad flag, a missing binary) becomes a
``setup_error`` Result that says what sbx printed, never a JSON traceback.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ._core import FileData, duration
from .errors import LocalRunError
from .models import Result

# The file the code is run as, in the workspace: tracebacks name
# /workspace/main.py, as with sbx serve's /v1/exec.
CODE_FILE = "main.py"

# Request limits (sbx serve's keys) as `sbx exec` flags.
_FLAG = {"wall_time": "--timeout", "output": "--output-limit"}

# How much of sbx's stderr a synthesised setup_error Result quotes.
_STDERR_TAIL = 4000


def limit_flags(limits: Optional[Mapping[str, Any]]) -> List[str]:
    out: List[str] = []
    for key, value in (limits or {}).items():
        flag = _FLAG.get(key, "--" + key.replace("_", "-"))
        out.append("%s=%s" % (flag, value))
    return out


def find_binary(binary: Optional[str]) -> str:
    path = binary or os.environ.get("SBX") or shutil.which("sbx")
    if not path:
        raise LocalRunError("the local transport needs the sbx binary: give binary=, set $SBX, or put sbx on $PATH "
                            "(make sbx builds it)")
    return path


class LocalRun:
    """One prepared ``sbx exec --json`` call: its argv and temp dirs."""

    def __init__(self, binary: str, code: Optional[str], argv: Optional[Sequence[str]], profile: Optional[str],
                 files: Optional[Mapping[str, FileData]], env: Optional[Mapping[str, str]],
                 limits: Optional[Mapping[str, Any]], timeout: Optional[float], outputs: bool,
                 extra_args: Sequence[str] = ()) -> None:
        if (code is None) == (argv is None):
            raise ValueError("give code (Python source) or argv (a program and its arguments), not both")
        self.tmp = tempfile.mkdtemp(prefix="sbx-client-")
        try:
            self.input_dir = os.path.join(self.tmp, "in")
            self.output_dir = os.path.join(self.tmp, "out") if outputs else None
            os.mkdir(self.input_dir, 0o700)
            for rel, data in (files or {}).items():
                if rel == CODE_FILE and code is not None:
                    raise ValueError("files[%r]: the code goes there; name the file otherwise" % rel)
                dest = _beneath(self.input_dir, rel)
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                with open(dest, "wb") as f:
                    f.write(data.encode("utf-8") if isinstance(data, str) else bytes(data))
            args = [binary, "exec", "--json", "--input-dir", self.input_dir]
            if profile:
                args += ["--profile", profile]
            if self.output_dir:
                args += ["--output-dir", self.output_dir]
            for k, v in (env or {}).items():
                args += ["--env", "%s=%s" % (k, v)]
            lim = dict(limits or {})
            if timeout is not None:
                lim["wall_time"] = duration(timeout)
            args += limit_flags(lim)
            args += list(extra_args)
            if code is not None:
                with open(os.path.join(self.input_dir, CODE_FILE), "w", encoding="utf-8") as f:
                    f.write(code)
                # A script inside --input-dir runs from its place there.
                args.append(os.path.join(self.input_dir, CODE_FILE))
            else:
                args += ["--"] + list(argv or [])
            self.argv = args
        except BaseException:
            self.cleanup()
            raise

    def result(self, returncode: int, stdout: bytes, stderr: bytes) -> Result:
        """The Result sbx printed, with the output dir's files, or a
        ``setup_error`` Result when it printed none."""
        try:
            doc = json.loads(stdout)
            if not isinstance(doc, dict) or "status" not in doc:
                raise ValueError("not a Result object")
        except ValueError:
            return no_json_result(returncode, stdout, stderr)
        return Result(doc, self.outputs(doc))

    def outputs(self, doc: Dict[str, Any]) -> Dict[str, bytes]:
        out: Dict[str, bytes] = {}
        if not self.output_dir:
            return out
        for entry in doc.get("files") or []:
            path = entry.get("path")
            if not path or entry.get("change") == "deleted" or entry.get("kind") not in (None, "file"):
                continue
            try:
                with open(_beneath(self.output_dir, path), "rb") as f:
                    out[path] = f.read()
            except (OSError, ValueError):
                continue  # not copied: the Result's warnings say why
        return out

    def cleanup(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


def no_json_result(returncode: int, stdout: bytes, stderr: bytes) -> Result:
    err = stderr.decode("utf-8", "replace")
    tail = err[-_STDERR_TAIL:].strip()
    last = tail.splitlines()[-1] if tail else "(nothing on stderr)"
    msg = "sbx exited %d without a Result: %s" % (returncode, last)
    return Result({
        "id": "", "status": "setup_error", "exit_code": returncode, "signal": None, "message": msg,
        "stdout": stdout.decode("utf-8", "replace")[-_STDERR_TAIL:], "stderr": tail,
        "usage": {}, "limits": {}, "layers": {}, "files": [], "inputs": [], "network": [],
        "warnings": ["the client made this Result: sbx printed no JSON (exit %d)" % returncode],
    })


def _beneath(root: str, rel: str) -> str:
    norm = os.path.normpath(rel)
    if os.path.isabs(rel) or norm.startswith("..") or norm in (".", ""):
        raise ValueError("path %r: want a clean relative path inside the workspace" % rel)
    return os.path.join(root, norm)


def run_local(run: LocalRun, stdin: Optional[str], wait_timeout: Optional[float]) -> Tuple[int, bytes, bytes]:
    try:
        p = subprocess.run(run.argv, input=(stdin or "").encode("utf-8"), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=wait_timeout)
    except FileNotFoundError as e:
        raise LocalRunError("the sbx binary %r: %s" % (run.argv[0], e)) from e
    except PermissionError as e:
        raise LocalRunError("the sbx binary %r: %s" % (run.argv[0], e)) from e
    return p.returncode, p.stdout, p.stderr
