"""The quick start, headless: `python -m evo_magic.quickstart`.

Runs a short multi-step task on a sample project with a lowered context limit, so that
micro-compaction and an automatic compaction happen, then a manual compaction with a focus, and
prints what happened. Without ANTHROPIC_API_KEY it uses the offline model and says so.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from evo_magic.compact.policy import CompactPolicy
from evo_magic.demo import make_demo_workspace
from evo_magic.models import has_credentials
from evo_magic.render import TextRenderer, size
from evo_magic.session import Session

TASKS = (
    "Survey this project: what does it do, and where are the TODOs? Keep notes in a file.",
    "Now look again and double-check the notes against the code.",
)
FOCUS = "the TODOs in inventory.py and the notes file"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evo_magic.quickstart", description=__doc__)
    parser.add_argument("--workspace", help="where to create the sample project (default: temp)")
    parser.add_argument(
        "--context-limit", type=int, default=12_000, help="CompactPolicy.context_limit to use"
    )
    parser.add_argument("--model", help="a Claude model name, or 'offline'")
    args = parser.parse_args(argv)
    out = sys.stdout.write

    workspace = Path(args.workspace or tempfile.mkdtemp(prefix="evo-magic-quickstart-"))
    make_demo_workspace(workspace)
    policy = CompactPolicy(context_limit=args.context_limit)
    with Session(workspace, model=args.model, policy=policy) as session:
        if session.model.offline:
            why = "" if has_credentials() else " (no ANTHROPIC_API_KEY is set)"
            out(f"Using the offline model: a scripted stand-in, not Claude{why}.\n")
        else:
            out(f"Using {session.model.name} through the anthropic SDK.\n")
        out(f"Workspace: {workspace}\ncontext_limit: {policy.context_limit:,} characters\n")
        session.subscribe(TextRenderer(out))
        for task in TASKS:
            out(f"\n>>> {task}\n")
            session.ask(task)
        out(f"\n>>> manual compaction, focus={FOCUS!r}\n")
        session.compact(FOCUS)
        out(
            f"\nDone. Context now: {size(session.context())}; "
            f"{session.state.compact_count} full compaction(s), "
            f"recent files: {', '.join(session.state.recent_files) or 'none'}.\n"
            f"Transcript: {session.transcript_path}\n"
            "Load it with: evo_magic.load_transcripts(<that path>)\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
