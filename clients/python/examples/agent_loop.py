#!/usr/bin/env python3
"""The agent loop end to end: perceive -> plan -> execute -> observe.

The task is the brief's data analysis: sales.csv goes in; quarterly revenue
totals and a chart (report.png) come out. An agent works step by step in
one sandbox session: load the CSV and look at it, group by quarter (which
fails the first time, as it does for models), read the error, fix the
group-by, plot. The session keeps ``sales`` between steps.

The "model" is :class:`ScriptedModel`, a scripted stand-in that plans from
what it observed, so the example runs offline and in CI:

    sbx serve --listen 127.0.0.1:8377 &        # SBX_TOKEN=... in its environment
    SBX_URL=http://127.0.0.1:8377 SBX_TOKEN=... python3 agent_loop.py --out out/

A server without sessions (issue 15) still runs it: each step is then a
one-shot run that replays the steps that worked before it, the way agents
carried state before sessions (the log says so).

A real model plugs in as any object with ``next_step(transcript)``; with
OpenAI's SDK, for instance (Anthropic's is the same with
``sbx.tools.anthropic()`` and ``tool_use`` blocks):

    class OpenAIModel:
        def __init__(self, client, model="gpt-4o"):
            self.client, self.model = client, model
        def next_step(self, transcript):
            msgs = [{"role": "user", "content": transcript.task}]
            for step in transcript.steps:
                msgs.append({"role": "assistant", "content": "```python\\n%s\\n```" % step.code})
                msgs.append({"role": "user", "content": "Observation:\\n" + step.observation})
            r = self.client.chat.completions.create(model=self.model, messages=msgs, tools=[sbx.tools.openai()])
            calls = r.choices[0].message.tool_calls
            return sbx.tools.parse_call(calls[0])[1] if calls else None
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass, field
from typing import List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # run from the checkout without installing

import sbx  # noqa: E402
import sbx.tools  # noqa: E402

TASK = ("sales.csv (date, region, product, units, unit_price) is in the workspace. Compute the revenue "
        "(units * unit_price) per calendar quarter, print the totals, and save a bar chart as report.png.")
MAX_STEPS = 6


@dataclass
class Step:
    code: str
    observation: str
    ok: bool


@dataclass
class Transcript:
    """What the agent has perceived so far: the task and each step's outcome."""

    task: str
    steps: List[Step] = field(default_factory=list)


class ScriptedModel:
    """A stand-in for a model: plans the next step from the transcript.

    Its first group-by forgets that ``revenue`` is not a column; it reads
    the KeyError in the observation and fixes it, as a model would.
    """

    LOOK = 'import pandas as pd\nsales = pd.read_csv("sales.csv", parse_dates=["date"])\nprint(sales.dtypes)\nsales.head()'
    GROUP = 'quarterly = sales.groupby(sales["date"].dt.to_period("Q"))["revenue"].sum()\nquarterly'
    FIX = ('sales["revenue"] = sales["units"] * sales["unit_price"]\n'
           'quarterly = sales.groupby(sales["date"].dt.to_period("Q"))["revenue"].sum().round(2)\n'
           'print(quarterly.to_string())')
    PLOT = ('import json\nimport matplotlib\nmatplotlib.use("Agg")\nimport matplotlib.pyplot as plt\n'
            'ax = quarterly.plot(kind="bar", title="Revenue per quarter", color="#4C72B0")\n'
            'ax.set_xlabel("quarter"); ax.set_ylabel("revenue")\nplt.tight_layout()\n'
            'plt.savefig("report.png", dpi=100)\nplt.close("all")\n'
            'print("TOTALS " + json.dumps({str(k): float(v) for k, v in quarterly.items()}))')

    def next_step(self, transcript: Transcript) -> Optional[str]:
        done = [s.code for s in transcript.steps if s.ok]
        last = transcript.steps[-1] if transcript.steps else None
        if self.LOOK not in done:
            return self.LOOK
        if last is not None and not last.ok:
            if "KeyError" in last.observation and "revenue" in last.observation:
                return self.FIX  # the observation named the missing column
            raise RuntimeError("the scripted model did not expect this observation:\n" + last.observation)
        if self.FIX not in done and self.GROUP not in [s.code for s in transcript.steps]:
            return self.GROUP
        if self.PLOT not in done:
            return self.PLOT
        return None  # the task is done


class Executor:
    """Runs a step in the session, or, on a server without sessions, as a
    one-shot run replaying the steps that worked before it."""

    def __init__(self, url: Optional[str], token: Optional[str], profile: str, csv: bytes) -> None:
        self.csv = csv
        self.done: List[str] = []
        try:
            self.sandbox = sbx.Sandbox.create(profile=profile, timeout=600, url=url, token=token)
            self.session = True
            self.sandbox.files.write("sales.csv", csv)
        except sbx.SessionsUnavailable:
            self.sandbox = sbx.Sandbox(url, token, profile=profile)
            self.session = False
        self.last_outputs: dict = {}

    def execute(self, code: str) -> tuple:
        if self.session:
            ex = self.sandbox.run_code(code, timeout=120)
            ok = ex.error is None and ex.status not in sbx.models.LIMIT_STATUSES
        else:
            prelude = ""
            if self.done:
                prelude = ("import contextlib as _c, io as _io\nwith _c.redirect_stdout(_io.StringIO()):\n"
                           "    exec(compile(%r, '<earlier steps>', 'exec'))\n" % "\n".join(self.done))
            body = prelude + _print_last_expression(code)
            ex = self.sandbox.run(body, files={"sales.csv": self.csv}, timeout=120)
            ok = ex.ok
            self.last_outputs = ex.outputs
        if ok:
            self.done.append(code)
        return ex, ok

    def fetch(self, path: str) -> bytes:
        if self.session:
            return self.sandbox.files.read(path, format="bytes")
        return self.last_outputs[path]

    def close(self) -> None:
        self.sandbox.kill()


def _print_last_expression(code: str) -> str:
    """A script prints nothing for a bare last expression; a session cell
    returns it. For one-shot runs, print it."""
    import ast

    tree = ast.parse(code)
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = tree.body[-1]
        tree.body[-1] = ast.Expr(ast.Call(ast.Name("print", ast.Load()), [last.value], []))
        ast.fix_missing_locations(tree)
        return ast.unparse(tree)
    return code


def log(step: int, phase: str, text: str, full: bool = False) -> None:
    first, *rest = text.strip().splitlines() or [""]
    if full:
        print("[step %d] %-8s %s" % (step, phase, first), flush=True)
        for line in rest[:40]:
            print("           | " + line, flush=True)
        return
    print("[step %d] %-8s %s%s" % (step, phase, first, " (+%d lines)" % len(rest) if rest else ""), flush=True)


def failure(outcome) -> str:
    if outcome.error is not None:
        return str(outcome.error)
    lines = outcome.stderr.strip().splitlines()
    return "%s: %s" % (outcome.status, lines[-1] if lines else outcome.message)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default=os.environ.get("SBX_URL"), help="sbx serve's address (default $SBX_URL)")
    ap.add_argument("--token", default=os.environ.get("SBX_TOKEN"), help="its bearer token (default $SBX_TOKEN)")
    ap.add_argument("--profile", default="standard")
    ap.add_argument("--csv", default=os.path.join(HERE, "..", "..", "..", "examples", "sales.csv"))
    ap.add_argument("--out", default=".", help="where report.png goes")
    args = ap.parse_args(argv)

    with open(args.csv, "rb") as f:
        csv = f.read()
    model = ScriptedModel()
    transcript = Transcript(TASK)
    executor = Executor(args.url, args.token, args.profile, csv)
    print("agent: %s on %s (%s)" % ("a session" if executor.session else "one-shot runs", args.url,
                                    "sessions" if executor.session else
                                    "this server has no sessions: each step replays the steps that worked"), flush=True)
    try:
        for n in range(1, MAX_STEPS + 1):
            # perceive: the transcript so far is the model's input
            code = model.next_step(transcript)  # plan
            if code is None:
                log(n, "done", "the model says the task is done")
                break
            log(n, "plan", code, full=True)
            t0 = time.monotonic()
            outcome, ok = executor.execute(code)  # execute
            observation = sbx.tools.render(outcome, max_chars=4000)  # observe
            log(n, "execute", "%s in %.2fs" % ("ok" if ok else "FAILED: %s" % failure(outcome),
                                               time.monotonic() - t0))
            log(n, "observe", observation, full=True)
            transcript.steps.append(Step(code, str(observation), ok))
        else:
            print("agent: no answer within %d steps" % MAX_STEPS, file=sys.stderr)
            return 1
        png = executor.fetch("report.png")
    finally:
        executor.close()
    os.makedirs(args.out, exist_ok=True)
    dest = os.path.join(args.out, "report.png")
    with open(dest, "wb") as f:
        f.write(png)
    totals = next(line for s in transcript.steps for line in s.observation.splitlines() if line.startswith("TOTALS "))
    print("agent: wrote %s (%d bytes); quarterly revenue: %s" % (dest, len(png), totals[len("TOTALS "):]))
    failed = sum(not s.ok for s in transcript.steps)
    print("agent: %d steps, %d failed and fixed" % (len(transcript.steps), failed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
