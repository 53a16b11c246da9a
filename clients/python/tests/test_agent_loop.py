"""examples/agent_loop.py end to end against a real `sbx serve`:
report.png comes out, the steps are logged, the failed step is fixed."""

from __future__ import annotations

import csv
import datetime
import json
import os
import subprocess
import sys
from collections import defaultdict

import sbx

from conftest import CLIENT, PNG_MAGIC, REPO, Server


def expected_totals() -> dict:
    totals: dict = defaultdict(float)
    with open(os.path.join(REPO, "examples", "sales.csv")) as f:
        for row in csv.DictReader(f):
            d = datetime.date.fromisoformat(row["date"])
            totals["%dQ%d" % (d.year, (d.month - 1) // 3 + 1)] += int(row["units"]) * float(row["unit_price"])
    return {k: round(v, 2) for k, v in sorted(totals.items())}


def test_agent_loop_end_to_end(server: Server, tmp_path) -> None:
    out = tmp_path / "out"
    env = dict(os.environ, SBX_URL=server.url, SBX_TOKEN=server.token, PYTHONDONTWRITEBYTECODE="1")
    p = subprocess.run([sys.executable, os.path.join(CLIENT, "examples", "agent_loop.py"), "--out", str(out)],
                       capture_output=True, text=True, env=env, timeout=600, cwd=str(tmp_path))
    log = p.stdout
    assert p.returncode == 0, log + p.stderr
    png = (out / "report.png").read_bytes()
    assert png.startswith(PNG_MAGIC) and len(png) > 5000
    # perceive -> plan -> execute -> observe, logged for every step
    for phase in ("plan", "execute", "observe"):
        assert "[step 1] %s" % phase in log, log
    failed = [line for line in log.splitlines() if "execute  FAILED" in line]
    assert len(failed) == 1 and "KeyError" in failed[0] and "revenue" in failed[0], log
    assert "1 failed and fixed" in log
    totals = json.loads(log.split("quarterly revenue: ", 1)[1].splitlines()[0])
    assert totals == expected_totals()
    mode = log.splitlines()[0]
    try:
        sbx.Sandbox.create(url=server.url, token=server.token).kill()
        has_sessions = True
    except sbx.SessionsUnavailable:
        has_sessions = False
    if has_sessions:
        assert mode.startswith("agent: a session"), mode
    else:
        assert "has no sessions: each step replays" in mode, mode
