"""evo_magic's prices at load beside ccusage's, on the same Claude Code and Codex folders.

    python -m benchmarks.bench_ccusage                      # the repository's real fixtures
    python -m benchmarks.bench_ccusage --claude ~/.claude/projects --codex ~/.codex/sessions

ccusage (npm, 20.0.24 with its Linux binary `@ccusage/ccusage-linux-x64`) is installed into a
temporary prefix with `npm install --prefix`, then run offline over a copy of the folders laid
out as it expects them (`CLAUDE_CONFIG_DIR/projects/...`, `CODEX_HOME/sessions/...`):
`ccusage claude monthly --json --offline` and `ccusage codex monthly --json --offline`. Its
per-model token sums and costs are printed beside `load_transcripts`'s (`calls` grouped by
model). Without node or npm it says so and stops. Not part of the test suite (it installs a
package); docs/ccusage.md explains every difference it shows.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "tests" / "fixtures" / "real"
PACKAGES = ("ccusage@20.0.24", "@ccusage/ccusage-linux-x64@20.0.24")
TOKENS = ("input", "output", "cache_write", "cache_read")
_OURS = {
    "input": "input_tokens",
    "output": "output_tokens",
    "cache_write": "cache_creation_input_tokens",
    "cache_read": "cache_read_input_tokens",
}
_THEIRS = {
    "input": "inputTokens",
    "output": "outputTokens",
    "cache_write": "cacheCreationTokens",
    "cache_read": "cacheReadTokens",
}


def install(prefix: Path) -> Path | None:
    """ccusage installed under `prefix`: the path of its command, or None (said why)."""
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        print("skipped: node and npm are needed to install ccusage (not found on PATH)")
        return None
    done = subprocess.run(
        [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", *PACKAGES],
        capture_output=True,
        text=True,
        timeout=600,
    )
    command = prefix / "node_modules" / ".bin" / "ccusage"
    if done.returncode != 0 or not command.exists():
        print(f"skipped: npm install {' '.join(PACKAGES)} failed: {done.stderr.strip()[-300:]}")
        return None
    return command


def laid_out(claude: list[Path], codex: list[Path], home: Path) -> tuple[Path, Path]:
    """Copies of the folders where ccusage looks: (CLAUDE_CONFIG_DIR, CODEX_HOME)."""
    claude_home, codex_home = home / "claude", home / "codex"
    for i, folder in enumerate(claude):
        shutil.copytree(folder, claude_home / "projects" / f"p{i}", dirs_exist_ok=True)
    for i, folder in enumerate(codex):
        shutil.copytree(folder, codex_home / "sessions" / f"s{i}", dirs_exist_ok=True)
    return claude_home, codex_home


def ccusage(command: Path, agent: str, env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [str(command), agent, "monthly", "--json", "--offline"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **env},
    )
    if done.returncode != 0:
        raise RuntimeError(f"ccusage {agent} failed: {done.stderr.strip()[-300:]}")
    return json.loads(done.stdout)


def theirs_by_model(report: dict[str, Any]) -> dict[str, dict[str, float]]:
    """ccusage's tokens and cost per model over every month (Codex reports cost per month:
    a month of one model gives that model its cost; else the cost is the month's, unsplit)."""
    found: dict[str, dict[str, float]] = {}
    for month in report.get("monthly", []):
        if "modelBreakdowns" in month:  # Claude Code
            rows = [(m["modelName"], m, m.get("cost")) for m in month["modelBreakdowns"]]
        else:  # Codex
            models = month.get("models", {})
            cost = month.get("costUSD") if len(models) == 1 else None
            rows = [(name, m, cost) for name, m in models.items()]
        for name, counts, cost in rows:
            row = found.setdefault(name, {kind: 0 for kind in (*TOKENS, "cost")})
            for kind in TOKENS:
                row[kind] += counts.get(_THEIRS[kind], 0)
            row["cost"] = row["cost"] + cost if cost is not None else float("nan")
    return found


def ours_by_model(folders: list[Path]) -> dict[str, dict[str, float]]:
    from evo_magic import load_transcripts

    found: dict[str, dict[str, float]] = {}
    for folder in folders:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            calls = load_transcripts(folder).calls
        if calls.empty:
            continue
        calls = calls[calls["model"].notna()]
        for model, mine in calls.groupby(calls["model"].astype(str)):
            row = found.setdefault(model, {kind: 0 for kind in (*TOKENS, "cost")})
            for kind in TOKENS:
                row[kind] += int(mine[_OURS[kind]].fillna(0).sum())
            row["cost"] += float(mine["cost_usd"].fillna(0).sum())
    return found


def table(theirs: dict[str, dict[str, float]], ours: dict[str, dict[str, float]]) -> list[str]:
    lines = [
        "| model | tokens (input / output / cache write / cache read): ccusage | evo_magic "
        "| cost ccusage | cost evo_magic | difference |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for model in sorted(set(theirs) | set(ours)):
        a, b = theirs.get(model), ours.get(model)
        spell = lambda r: " / ".join(f"{int(r[k]):,}" for k in TOKENS) if r else "—"  # noqa: E731
        cost_a = f"${a['cost']:.4f}" if a else "—"
        cost_b = f"${b['cost']:.4f}" if b else "—"
        diff = "—"
        if a and b and a["cost"] == a["cost"] and a["cost"]:
            diff = f"{100 * (b['cost'] - a['cost']) / a['cost']:+.2f}%"
        same = " (equal)" if a and b and all(a[k] == b[k] for k in TOKENS) else ""
        lines.append(
            f"| `{model}` | {spell(a)} | {spell(b)}{same} | {cost_a} | {cost_b} | {diff} |"
        )
    total_a = sum(r["cost"] for r in theirs.values() if r["cost"] == r["cost"])
    total_b = sum(r["cost"] for r in ours.values())
    lines.append(
        f"| **total** | | | ${total_a:.4f} | ${total_b:.4f} | "
        f"{100 * (total_b - total_a) / total_a:+.2f}% |"
        if total_a
        else "| **total** | | | | | |"
    )
    return lines


def default_folders() -> tuple[list[Path], list[Path]]:
    claude = sorted(p for p in REAL.glob("claude-code-*") if p.is_dir())
    return claude, [REAL / "codex-0.104"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claude", type=Path, action="append", help="a Claude Code folder")
    parser.add_argument("--codex", type=Path, action="append", help="a Codex sessions folder")
    args = parser.parse_args(argv)
    claude, codex = default_folders()
    claude, codex = args.claude or claude, args.codex or codex
    with tempfile.TemporaryDirectory(prefix="evo-ccusage-") as tmp:
        command = install(Path(tmp) / "npm")
        if command is None:
            return 0
        claude_home, codex_home = laid_out(claude, codex, Path(tmp) / "data")
        theirs = theirs_by_model(
            ccusage(command, "claude", {"CLAUDE_CONFIG_DIR": str(claude_home)})
        )
        theirs.update(theirs_by_model(ccusage(command, "codex", {"CODEX_HOME": str(codex_home)})))
        ours = ours_by_model([*claude, *codex])
    print(f"ccusage {PACKAGES[0].split('@')[1]} and evo_magic over:")
    for folder in [*claude, *codex]:
        print(f"  {folder}")
    print("\n".join(table(theirs, ours)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
