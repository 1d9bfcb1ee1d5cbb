"""`python -m fleetprobe.backends.scripted_model --port N [--rules FILE] [--trace FILE]`:
the scripted model on loopback (docs/scripted-model.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

import uvicorn

from .app import ModelTrace, create_app
from .rules import RULES_FILE, load


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m fleetprobe.backends.scripted_model",
                                description="a rule-based model on the OpenAI wire")
    p.add_argument("--host", default="127.0.0.1", choices=["127.0.0.1"],
                   help="loopback only")
    p.add_argument("--port", type=int, default=8780)
    p.add_argument("--rules", type=Path, default=RULES_FILE)
    p.add_argument("--trace", type=Path, default=None,
                   help="JSONL file every prompt and answer is appended to")
    args = p.parse_args(argv)
    app = create_app(load(args.rules), ModelTrace(args.trace))
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
