"""Transcript formats are plug-ins: the built-ins and a third party's reader are registered the
same way (entry points of `evo_magic.formats`), and a file's format is decided by its content."""

from __future__ import annotations

import json
import shutil
import textwrap
import warnings
from pathlib import Path

import pytest

from evo_magic import formats, load_transcripts
from evo_magic.analysis.errors import TranscriptError, TranscriptWarning

REAL = Path(__file__).parent / "fixtures" / "real"
BUILT_IN = [
    "evo_magic",
    "codex",
    "claude_code",
    "swe_agent",
    "mini_swe_agent",
    "inspect",
    "openhands",
    "gemini_cli",
]

PLUGIN = textwrap.dedent(
    '''
    """A third party's reader: JSON lines of {"mylab": 1, "ask", "answer", "used"}."""
    import json

    from evo_magic.analysis.formats.documents import Conversation, part
    from evo_magic.analysis.formats.registry import Format


    def detect(sniff):
        return bool(sniff.records) and sniff.records[0].get("mylab") == 1


    def read(engine, sources):
        conversations = []
        for source in sources:
            c = Conversation("mylab", source, source.path.stem)
            for number, line in enumerate(source.data.decode().splitlines(), 1):
                record = json.loads(line)
                c.message("user", "prompt", [{"block_type": "text", "text": record["ask"]}])
                index = c.message(
                    "assistant", "response", [{"block_type": "text", "text": record["answer"]}]
                )
                c.call("claude-sonnet-4-5", record["used"], index, line=number)
            conversations.append(c)
        return part(conversations, sum(len(c.calls) for c in conversations))


    FORMAT = Format("mylab", "mylab's logs", "a first record with mylab = 1", detect, read,
                    suffixes=(".mylog",))
    '''
)


def install(site: Path, name: str, entry_points: str, module: str | None = None) -> None:
    """A distribution as pip installs one: a module and its dist-info folder with entry points."""
    if module is not None:
        (site / f"{name.replace('-', '_')}.py").write_text(module)
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[evo_magic.formats]\n{entry_points}\n")


@pytest.fixture
def site(tmp_path, monkeypatch):
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    return folder


def test_formats_lists_the_built_in_readers_as_entry_points_of_evo_magic():
    table = formats()
    assert list(table.columns) == ["name", "reads", "recognised_by", "suffixes", "provided_by"]
    assert table["name"].tolist()[: len(BUILT_IN)] == BUILT_IN
    mine = table[table["name"].isin(BUILT_IN)]
    assert mine["provided_by"].str.startswith("evo-magic (evo_magic.analysis.formats.").all()
    assert (mine["reads"].str.len() > 20).all() and (mine["recognised_by"].str.len() > 20).all()


def test_a_third_party_reader_registered_by_entry_point_reads_its_files(site, tmp_path):
    install(site, "mylab-reader", "mylab = mylab_reader:FORMAT", PLUGIN)
    assert "mylab" in formats()["name"].tolist()
    row = formats().set_index("name").loc["mylab"]
    assert row["provided_by"] == "mylab-reader (mylab_reader:FORMAT)"
    runs = tmp_path / "runs"
    runs.mkdir()
    lines = [{"mylab": 1, "ask": "2+2?", "answer": "4", "used": {"input_tokens": 12}}] * 3
    (runs / "a.mylog").write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    (runs / "b.mylog").write_text(json.dumps({"other": 1}) + "\n")  # not mylab's: by content
    shutil.copy(REAL / "swe-agent-1.0" / "marshmallow-code__marshmallow-1867.traj", runs)
    t = load_transcripts(runs)
    assert t.calls.groupby("source", observed=True).size().to_dict() == {
        "mylab": 3,
        "swe_agent": 11,
    }
    mine = t.calls[t.calls["source"] == "mylab"]
    assert mine["input_tokens"].tolist() == [12, 12, 12]
    assert mine["line"].tolist() == [1, 2, 3]
    assert t.skipped == {"file in no known format": 1}


def test_a_plug_in_that_does_not_load_is_left_out_with_a_warning(site):
    install(site, "broken-reader", "broken = no_such_module_anywhere:FORMAT")
    install(site, "thief-reader", "codex = thief_reader:FORMAT", PLUGIN)
    with pytest.warns(TranscriptWarning) as caught:
        names = formats()["name"].tolist()
    said = " ".join(str(w.message) for w in caught)
    assert "'broken'" in said and "did not load" in said
    assert "'codex'" in said and "reuses the name" in said
    assert names == BUILT_IN  # the built-in codex reader is still the one used


def test_a_file_naming_a_module_never_imports_it(site, tmp_path):
    marker = tmp_path / "imported"
    (site / "payload_module.py").write_text(f"open({str(marker)!r}, 'w').close()\nFORMAT = 1\n")
    log = tmp_path / "x.jsonl"
    records = [{"format": "payload_module:FORMAT", "reader": "payload_module", "type": "x"}]
    log.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    with pytest.raises(TranscriptError, match="registered format"):
        load_transcripts(log)
    assert not marker.exists()


def test_the_format_is_recognised_by_content_whatever_the_name(tmp_path):
    folder = tmp_path / "renamed"
    folder.mkdir()
    shutil.copy(
        REAL / "swe-agent-0.x" / "pydicom__pydicom-1458.traj", folder / "pydicom.jsonl"
    )  # a trajectory with the name of a JSON-lines file
    shutil.copy(
        REAL / "mini-swe-agent-2.2" / "sqlfluff__sqlfluff-2419.traj.json", folder / "run.traj"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = load_transcripts(folder)
    assert t.calls.groupby("source", observed=True).size().to_dict() == {
        "mini_swe_agent": 41,
        "swe_agent": 12,
    }


def test_a_folder_mixing_every_format_loads_alike_in_memory_and_in_a_lake(tmp_path):
    runs = tmp_path / "runs"
    for folder in ("swe-agent-0.x", "mini-swe-agent-2.3", "inspect-eval", "openhands-events"):
        shutil.copytree(REAL / folder, runs / folder)
    shutil.copytree(REAL / "codex-0.104", runs / "codex")
    t = load_transcripts(runs)
    lake = load_transcripts(runs, lake=tmp_path / "lake")
    by_source = t.calls.groupby("source", observed=True).size().to_dict()
    assert set(by_source) == {"swe_agent", "mini_swe_agent", "inspect", "openhands", "codex"}
    assert lake.calls.groupby("source", observed=True).size().to_dict() == by_source
    assert sorted(lake.session_ids()) == sorted(t.session_ids())


def test_the_built_in_readers_are_declared_once_in_the_same_order_as_pyproject():
    # A checkout that was never installed has no entry points: the registry then uses its own
    # table, which must say what pyproject.toml declares.
    import tomllib

    from evo_magic.analysis.formats.registry import BUILTIN

    project = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())
    declared = project["project"]["entry-points"]["evo_magic.formats"]
    assert list(declared.items()) == list(BUILTIN.items())


def test_other_json_files_in_a_folder_are_counted_not_read(tmp_path):
    runs = tmp_path / "runs"
    shutil.copytree(REAL / "openhands-events", runs)
    (runs / "results.json").write_text(json.dumps({"resolved": ["a", "b"], "total": 2}))
    (runs / "config.json").write_text("[1, 2, 3]")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # counted, not warned about
        t = load_transcripts(runs, prices={"gpt-4o-2024-08-06": {"input": 2.5, "output": 10}})
    assert t.skipped == {"file in no known format": 2}
    assert sorted(p.name for p in t.files) == sorted(
        p.name for p in REAL.glob("openhands-events/*")
    )
    with pytest.raises(TranscriptError, match=r"results\.json is neither .* registered format"):
        load_transcripts(runs / "results.json")  # named on its own: refused, said why


def test_a_sniff_parses_a_files_first_records_only_as_far_as_they_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evo_magic.analysis import loader

    lines = ["[1, 2]", '{"torn": ', *[json.dumps({"n": n}) for n in range(60)]]
    path = tmp_path / "a.jsonl"
    path.write_text("\n".join(lines) + "\n")
    parsed: list[bytes] = []
    parse = loader._parse

    def counted(line: bytes) -> object:
        parsed.append(line)
        return parse(line)

    monkeypatch.setattr(loader, "_parse", counted)
    head = loader.SourceFile(0, path, path.read_bytes()).head()
    assert parsed == []
    records = head.records
    assert bool(records) and records[0] == {"n": 0}
    assert len(parsed) == 2  # the torn line, then the first record; "[1, 2]" is no object
    assert records[:3] == [{"n": 0}, {"n": 1}, {"n": 2}] and len(parsed) == 4
    assert next(r for r in records if r["n"] == 4) == {"n": 4} and len(parsed) == 6
    # Read whole, it is what a full parse gives: the first 50 objects, with their lines.
    assert list(head) == [(n + 3, {"n": n}) for n in range(50)]
    assert len(records) == 50 and records[-1] == {"n": 49} and len(parsed) == 51
