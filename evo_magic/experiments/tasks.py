"""The built-in suite: five small, self-contained tasks shipped with the package.

    from evo_magic import tasks
    suite = tasks.builtin()

Each is a few requests asked in turn in a copy of a folder under `builtin/`, with reading in
between long enough that a run compacts at least once at the default limit (50,000
characters), and a shell check. They are written as plain directives (``Run `cmd`.``,
``Write to `PATH` the line `TEXT`.``) that any model follows and that the offline stand-in
works through literally (`evo_magic.models.offline_tasks`), so offline the outcome depends on
what the strategy left in the context:

- `find-value`: a setting found by a search across 40 files, asked for after long logs (lost
  when the search's output is summarised or masked away);
- `fix-test`: a failing unit test fixed as told (every strategy should pass: a control);
- `rename-symbol`: a rename across the files a search listed, after long notes (lost with the
  search's output);
- `constraint`: a rule stated at the end of a long first message, obeyed in a file written
  later (lost when the first message is cut, as the offline summary's goal line cuts it);
- `long-output`: a value at the end of a 36,000-character output (lost when the output goes
  to a file with a preview, as `large-outputs` does).
"""

from __future__ import annotations

from pathlib import Path

from evo_magic.experiments.task import Task

__all__ = ["BUILTIN_DIR", "builtin"]

BUILTIN_DIR = Path(__file__).parent / "builtin"

_CONSTRAINT_BRIEF = (
    "You are helping the data team tidy the quarterly sales export before it goes to finance. "
    "The export is split into two CSV files under export/, one row per region and product, "
    "with units sold and revenue in euros. Finance reads whatever we hand over literally, so "
    "be careful and factual, do not invent figures, and keep any file you write short and "
    "plain. Nothing needs to change in the export itself; we only need a short note saying "
    "it was checked. One rule for the whole session: every file you write must end with the "
    "line `reviewed-by: data-team`. Start by saying you are ready."
)

_SUITE: tuple[dict[str, object], ...] = (
    {
        "name": "find-value",
        "prompt": (
            "We need the retry budget of our services. Run `grep -rn 'retry_budget =' config`.",
            "Before answering, read the application logs: Run `cat logs/app-1.log`. "
            "Run `cat logs/app-2.log`.",
            "Write to `answer.txt` the line `retry_budget = ____`, with the value the search "
            "found.",
        ),
        "check": "grep -qx 'retry_budget = 17' answer.txt",
    },
    {
        "name": "fix-test",
        "prompt": (
            "The test suite fails. Run `python3 -m unittest -q test_calc`.",
            "Read the build logs first: Run `cat logs/build-1.log`. Run `cat logs/build-2.log`.",
            "Now fix it: In `calc.py`, replace `return a - b` with `return a + b`. "
            "Then Run `python3 -m unittest -q test_calc`.",
        ),
        "check": "python3 -m unittest -q test_calc",
    },
    {
        "name": "rename-symbol",
        "prompt": (
            "We are renaming fetch_rows to load_rows. Run `grep -rl fetch_rows src`.",
            "Read the review notes first: Run `cat notes/review-1.txt`. "
            "Run `cat notes/review-2.txt`.",
            "Replace `fetch_rows` with `load_rows` in every file the search listed. "
            "Then Run `grep -rn load_rows src`.",
        ),
        "check": 'test -z "$(grep -rl fetch_rows src)" && '
        'test "$(grep -rl load_rows src | wc -l)" -eq 5',
    },
    {
        "name": "constraint",
        "prompt": (
            _CONSTRAINT_BRIEF,
            "Look at the export: Run `cat export/q3-part1.csv`. Run `cat export/q3-part2.csv`.",
            "Write to `checked.txt` the line `Export checked: both parts read.`",
        ),
        "check": "tail -n 1 checked.txt | grep -qx 'reviewed-by: data-team'",
    },
    {
        "name": "long-output",
        "prompt": (
            "Run `cat data/measurements.txt`. Then Write to `answer.txt` the line "
            "`checksum: ____`, from the last line of that output.",
            "Now the calibration data: Run `cat data/calibration.txt`. "
            "Run `cat data/calibration-2.txt`.",
        ),
        "check": "grep -qx 'checksum: 7f3a91c4' answer.txt",
    },
)


def builtin() -> list[Task]:
    """The built-in suite (see the module docstring), a new list of `Task`s each call."""
    return [
        Task(
            name=str(spec["name"]),
            prompt=spec["prompt"],  # type: ignore[arg-type]
            workspace=BUILTIN_DIR / str(spec["name"]),
            check=str(spec["check"]),
            max_turns=12,
        )
        for spec in _SUITE
    ]
