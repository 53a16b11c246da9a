"""The local transport: the sbx binary, one `sbx exec --json` per run."""

from __future__ import annotations

import hashlib
import os
import stat

import pytest

import sbx

from conftest import PNG_MAGIC


def test_local_run(binary: str) -> None:
    res = sbx.run("import sys\nprint(open('data/x.txt').read(), sys.stdin.read())\nopen('o.bin', 'wb').write(b'\\x00\\x01')",
                  files={"data/x.txt": "in", "data/y.bin": b"\xff"}, stdin="piped", binary=binary, local=True)
    assert res.ok, res.raw
    assert res.stdout == "in piped\n"
    assert res.outputs == {"o.bin": b"\x00\x01"}
    (o,) = [f for f in res.files if f.path == "o.bin"]
    assert o.sha256 == hashlib.sha256(b"\x00\x01").hexdigest()
    assert {f.path for f in res.inputs} >= {"data/x.txt", "data/y.bin", "main.py"}


def test_local_code_past_the_argument_limit(binary: str) -> None:
    """`sbx exec -c` fails past 128 KiB (MAX_ARG_STRLEN); the client sends a file."""
    code = "x = 1\n" + "# filler\n" * 40000 + "print('big', x)\n"
    assert len(code) > 256 << 10
    res = sbx.Sandbox.local(binary=binary).run(code)
    assert res.ok and res.stdout == "big 1\n", res.raw


def test_local_limits_and_profile(binary: str) -> None:
    sb = sbx.Sandbox.local("strict", binary=binary)
    res = sb.run("while True: pass", timeout=1)
    assert res.status == "timeout" and res.profile == "strict", res.raw
    with pytest.raises(sbx.TimeoutExceeded):
        res.raise_for_status()
    res = sb.run("x = bytearray(400 << 20)", limits={"memory": "64M"})
    assert res.status == "memory_limit", res.raw


def test_local_png(binary: str) -> None:
    res = sbx.Sandbox.local("data", binary=binary).run(
        "import matplotlib.pyplot as plt\nplt.bar([1, 2], [3, 4])\nplt.savefig('r.png')")
    assert res.ok, res.raw
    assert res.outputs["r.png"].startswith(PNG_MAGIC)


def test_local_streaming_callbacks_get_the_output_after_the_run(binary: str) -> None:
    seen = []
    res = sbx.Sandbox.local(binary=binary).run("import sys\nprint('o')\nprint('e', file=sys.stderr)",
                                               on_stdout=seen.append, on_stderr=seen.append)
    assert [str(m) for m in seen] == [res.stdout, res.stderr] and res.stdout == "o\n"


def test_local_errors_from_sbx_are_results(binary: str) -> None:
    res = sbx.Sandbox.local("no-such-profile", binary=binary).run("print(1)")
    assert res.status == "setup_error" and "no-such-profile" in res.message
    with pytest.raises(sbx.SetupError):
        res.raise_for_status()


def test_local_no_json_fallback(tmp_path) -> None:
    """A binary that printed no JSON (sbx crashed, or is not sbx) gives a
    setup_error Result that quotes its stderr."""
    fake = tmp_path / "fake-sbx"
    fake.write_text("#!/bin/sh\necho 'sbx: something broke' >&2\nexit 125\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    res = sbx.Sandbox.local(binary=str(fake)).run("print(1)")
    assert res.status == "setup_error" and res.exit_code == 125
    assert "without a Result" in res.message and "something broke" in res.message
    assert any("printed no JSON" in w for w in res.warnings)


def test_local_missing_binary(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SBX", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(sbx.LocalRunError, match="needs the sbx binary"):
        sbx.Sandbox.local()
    with pytest.raises(sbx.LocalRunError):
        sbx.Sandbox.local(binary=str(tmp_path / "nope")).run("print(1)")


def test_local_sessions_need_a_server(binary: str) -> None:
    sb = sbx.Sandbox.local(binary=binary)
    for call in (lambda: sb.run_code("x = 1"), lambda: sb.files.list(), lambda: sb.files.write("a", "b"),
                 lambda: sb.restart()):
        with pytest.raises(sbx.SessionsUnavailable, match="sessions need a server"):
            call()
    assert sb.kill() is False


def test_local_temp_dirs_are_removed(binary: str, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    sbx.Sandbox.local(binary=binary).run("open('x', 'w').write('1')", files={"a": "b"})
    assert os.listdir(tmp_path) == []
