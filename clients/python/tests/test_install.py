"""`pip install ./clients/python` works offline: the build backend is in
the tree, and the sync client needs nothing else."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import CLIENT


def test_pip_install_offline(tmp_path) -> None:
    try:
        import pip  # noqa: F401
    except ImportError:
        pytest.skip("pip is not installed for %s (Debian: python3-pip)" % sys.executable)
    target = tmp_path / "site"
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_NO_CACHE_DIR="1", HOME=str(tmp_path), PYTHONDONTWRITEBYTECODE="1")
    # Build from a copy: pip writes build/ and *.egg-info into a tree it may
    # not own (the suite also runs as uid 65534).
    src = tmp_path / "src"
    subprocess.run(["cp", "-r", CLIENT, str(src)], check=True)
    p = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--disable-pip-version-check",
                        "--target", str(target), str(src)], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    code = "import sbx, sbx.tools; print(sbx.__file__); print(sbx.Sandbox.run.__doc__ is not None)"
    p = subprocess.run([sys.executable, "-S", "-c", "import sys; sys.path.insert(0, %r); %s" % (str(target), code)],
                       capture_output=True, text=True, env=env, cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == [str(target / "sbx" / "__init__.py"), "True"]
    assert (target / "sbx" / "py.typed").exists()
