"""fold-files beyond Python: the signatures of small real JavaScript, TypeScript, Go and Rust
files (tests/fixtures/fold) read with tree-sitter and the grammars of the `fold` extra; live
through the real SDK against the loopback fake and in replay; and, without a grammar, the file
left out with one clear line to the user while Python keeps its `ast`."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support.fake_api import FakeAnthropic, reply, tool_use
from test_cheap_strategies import assert_replays
from test_replay_fidelity import agent_requests, scripted_agent

from evo_magic.models import AnthropicModel
from evo_magic.session import Session
from evo_magic.strategies.fold import FOLD_HEADER
from evo_magic.strategies.registry import make_strategy
from evo_magic.strategies.signatures import signatures

FIXTURES = Path(__file__).parent / "fixtures" / "fold"
TESTS = Path(__file__).parent

EXPECTED = {
    "app.ts": [
        "export interface Item",
        "    count(): number",
        "export type Id = string | number",
        "export class Inventory<T extends Item> extends Base implements Store",
        "    constructor(private readonly owner: string)",
        "    add(item: T): void",
        "    async load(path: string, strict = false): Promise<number>",
        "export function total(items: Item[]): number",
        "export const double = (x: number): number =>",
        "enum Colour",
    ],
    "util.js": [
        "function parse(text, options = {})",
        "class Cache extends Map",
        "    get(key)",
        "    static of(entries)",
        "const load = async (path) =>",
        "export default function main()",
    ],
    "server.go": [
        "type Server struct",
        "type Handler interface",
        "    Serve(w http.ResponseWriter, r *http.Request) error",
        "func New(addr string) *Server",
        "func (s *Server) Start(ctx context.Context, port int) (bool, error)",
    ],
    "lib.rs": [
        "pub struct Store<T>",
        "pub enum Kind",
        "pub trait Named",
        "    fn name(&self) -> &str",
        "    fn greet(&self) -> String",
        "impl<T: Clone> Store<T>",
        "    pub fn new() -> Self",
        "    pub fn get(&self, key: &str) -> Option<T>",
        "pub fn total(values: &[u64]) -> u64",
        "mod inner",
        "    pub(crate) fn helper(x: i32) -> i32",
    ],
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_signatures_of_each_language_leave_the_bodies_out(name: str):
    source = (FIXTURES / name).read_text()
    found = signatures(name, source)
    assert found == EXPECTED[name]
    bodies = ("return", "push(", "JSON.parse", "reduce(", "HashMap::new", "cloned()")
    assert not any(word in line for line in found for word in bodies)


def test_a_tsx_file_and_a_broken_file_give_what_the_parser_recovers():
    tsx = "export function App({ name }: Props) {\n  return <div>{name}</div>;\n}\n"
    assert signatures("App.tsx", tsx) == ["export function App({ name }: Props)"]
    broken = "func Good(a int) int { return a }\nfunc Broken(a int {\n"
    assert signatures("x.go", broken)[0] == "func Good(a int) int"
    assert signatures("notes.txt", "function f() {}") == []


def _copy_fixtures(workspace: Path) -> None:
    for path in FIXTURES.iterdir():
        shutil.copy(path, workspace / path.name)


READS = ("server.go", "inventory.py", "lib.rs", "app.ts", "util.js", "README.md")


def _script() -> list:
    return [
        reply(tool_use("read_file", {"path": name}, id=f"toolu_{i}"))
        for i, name in enumerate(READS)
    ]


def test_fold_files_folds_every_language_read_live_and_in_replay(workspace: Path):
    _copy_fixtures(workspace)
    strategy = make_strategy("fold-files(max_files=10, max_tokens=4000, when='on_request')")
    with FakeAnthropic(scripted_agent(*_script())) as server:
        model = AnthropicModel(client=server.client(max_retries=0))
        with Session(workspace, model=model, strategies=[strategy]) as s:
            s.ask("Read the code.")
            assert s.compact().success
            s.ask("Go on.")
        server.assert_no_rejections()
    folded = agent_requests(server)[-1]["messages"][0]["content"][-1]["text"]
    assert folded.startswith(FOLD_HEADER)
    sections = {
        part.split("\n", 1)[0]: part.split("\n", 1)[1].splitlines()
        for part in folded.split("\n## ")[1:]
    }
    # Newest read first; every source file read, each with its signatures; README not.
    assert list(sections) == ["util.js", "app.ts", "lib.rs", "inventory.py", "server.go"]
    for name, lines in EXPECTED.items():
        assert sections[name] == lines
    assert any(line.startswith("def ") or "class " in line for line in sections["inventory.py"])
    assert_replays(s, server, [strategy])


@pytest.mark.slow  # a child Python running a session
def test_without_a_grammar_the_file_is_left_out_with_one_line_and_python_still_folds(
    workspace: Path,
):
    """A child Python where the Go grammar cannot be imported (as when the extra is not
    installed): the session runs live against the fake; the user gets one notice naming the
    extra, the Go file is not folded, the Python one is."""
    _copy_fixtures(workspace)
    child = textwrap.dedent(
        f"""
        import json, sys
        sys.modules["tree_sitter_go"] = None  # not installed: importing it fails
        sys.path.insert(0, {str(TESTS)!r})
        from pathlib import Path
        from support.fake_api import FakeAnthropic, reply, tool_use
        from test_replay_fidelity import scripted_agent
        from evo_magic.events import Notice
        from evo_magic.models import AnthropicModel
        from evo_magic.session import Session
        from evo_magic.strategies.registry import make_strategy

        reads = [reply(tool_use("read_file", {{"path": name}}, id=f"toolu_{{i}}"))
                 for i, name in enumerate({list(READS)!r})]
        with FakeAnthropic(scripted_agent(*reads)) as server:
            model = AnthropicModel(client=server.client(max_retries=0))
            fold = make_strategy("fold-files(max_files=10, max_tokens=4000, when='on_request')")
            with Session(Path({str(workspace)!r}), model=model, strategies=[fold]) as s:
                notices = []
                s.subscribe(lambda e: notices.append(e.message) if isinstance(e, Notice) else None)
                s.ask("Read the code.")
                assert s.compact().success
            server.assert_no_rejections()
        print(json.dumps({{"notices": notices, "opening": s.messages[0]["content"][-1]["text"]}}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", child], capture_output=True, text=True, timeout=120, check=True
    )
    shown = json.loads(done.stdout.strip().splitlines()[-1])
    folding = [n for n in shown["notices"] if n.startswith("fold-files:")]
    assert len(folding) == 1 and "\n" not in folding[0]
    assert "Go files are not folded" in folding[0] and "[fold]" in folding[0]
    opening = shown["opening"]
    assert "## server.go" not in opening
    assert "## inventory.py" in opening and "## lib.rs" in opening
