"""Fixtures: a real `sbx serve` on 127.0.0.1, started by the test.

The binary is $SBX, else the checkout's ./sbx (built with `make sbx` when
it is missing). The server runs as whoever runs pytest: `make test-python`
runs the suite as root and again as uid 65534.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from typing import Iterator, List

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(CLIENT))
sys.path.insert(0, CLIENT)

import sbx  # noqa: E402


def sbx_binary() -> str:
    path = os.environ.get("SBX") or os.path.join(REPO, "sbx")
    if not os.path.exists(path):
        if os.environ.get("SBX"):
            pytest.exit("$SBX=%s does not exist" % path, 2)
        subprocess.run(["make", "-C", REPO, "sbx"], check=True)
    return os.path.abspath(path)


class Server:
    """One `sbx serve --listen 127.0.0.1:0` with a token file of its own."""

    def __init__(self, *args: str) -> None:
        self.binary = sbx_binary()
        self.dir = tempfile.mkdtemp(prefix="sbx-pytest-")
        self.token = secrets.token_hex(16)
        tokens = os.path.join(self.dir, "tokens")
        with open(tokens, "w") as f:
            f.write("pytest:%s\n" % self.token)
        os.chmod(tokens, 0o600)
        tmp = os.path.join(self.dir, "tmp")
        os.mkdir(tmp, 0o700)
        self.stderr: List[str] = []
        env = dict(os.environ, TMPDIR=tmp)
        env.pop("SBX_TOKEN", None)
        self.proc = subprocess.Popen([self.binary, "serve", "--listen", "127.0.0.1:0", "--token-file", tokens, *args],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     env=env, text=True)
        self.url = ""
        ready = threading.Event()

        def read() -> None:
            assert self.proc.stderr is not None
            for line in self.proc.stderr:
                self.stderr.append(line)
                if line.startswith("sbx serve: listening on ") and not self.url:
                    self.url = "http://" + line[len("sbx serve: listening on "):].split(";")[0].strip()
                    ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(60) or not self.url:
            self.stop()
            raise RuntimeError("sbx serve did not listen within 60s:\n" + "".join(self.stderr))

    def sandbox(self, **kw) -> sbx.Sandbox:
        return sbx.Sandbox(self.url, self.token, **kw)

    def ready(self) -> int:
        try:
            with urllib.request.urlopen(self.url + "/readyz", timeout=10) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    def stop(self) -> None:
        """Drain (SIGTERM) and wait; kill by pid only if it does not exit."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def binary() -> str:
    return sbx_binary()


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    s = Server("--max-concurrent", "2", "--queue", "8")
    yield s
    s.stop()


@pytest.fixture()
def busy_server() -> Iterator[Server]:
    """One worker and no queue, so that a second run gets 429; a small
    --max-body for 413."""
    s = Server("--max-concurrent", "1", "--queue", "0", "--max-body", "65536")
    yield s
    s.stop()


@pytest.fixture()
def sandbox(server: Server) -> sbx.Sandbox:
    return server.sandbox()


def new_session(server: Server) -> sbx.Sandbox:
    """A session on the server. The binary under test has sessions
    (issue 15): a 404 on POST /v1/sessions fails the test, not skips it."""
    return sbx.Sandbox.create(url=server.url, token=server.token, timeout=300)


@pytest.fixture()
def session(server: Server) -> Iterator[sbx.Sandbox]:
    sb = new_session(server)
    try:
        yield sb
    finally:
        sb.kill()


def wait_until(cond, timeout: float = 60.0, step: float = 0.05) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(step)
    return False


PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
