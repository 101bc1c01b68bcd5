"""Histories whose messages note when they are read, grown the way the agent loop grows them:
the linear-work tests count the messages one call (or one meter refresh) touches."""

from __future__ import annotations

from typing import Any

from evo_magic.compact.compactor import CompactionServices, Compactor
from evo_magic.compact.policy import CompactPolicy
from evo_magic.history import History
from evo_magic.strategies.registry import make_strategy

TOUCHED: set[int] = set()


class Counted(dict):
    """A message that notes when it is read: any lookup, iteration or encoding of it."""

    def _seen(self) -> None:
        TOUCHED.add(id(self))

    def get(self, *args: Any) -> Any:
        self._seen()
        return super().get(*args)

    def __getitem__(self, key: Any) -> Any:
        self._seen()
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self._seen()
        return super().__contains__(key)

    def __iter__(self) -> Any:
        self._seen()
        return super().__iter__()

    def items(self) -> Any:
        self._seen()
        return super().items()

    def keys(self) -> Any:
        self._seen()
        return super().keys()

    def values(self) -> Any:
        self._seen()
        return super().values()


def ask(n: int) -> Counted:
    return Counted(role="user", content=[{"type": "text", "text": f"request {n}: go on"}])


def batch(n: int) -> tuple[Counted, list[dict[str, Any]]]:
    """One model step: a turn that calls a tool (with some thinking), and its result."""
    use = {"type": "tool_use", "id": f"toolu_{n:06d}", "name": "read_file",
           "input": {"path": f"src/m{n % 7}.py"}}  # fmt: skip
    turn = Counted(role="assistant", content=[
        {"type": "thinking", "thinking": f"step {n}", "signature": "sig"},
        {"type": "text", "text": f"Reading file {n % 7}."}, use,
    ])  # fmt: skip
    result = {"type": "tool_result", "tool_use_id": use["id"], "content": f"line {n}\n" * 60}
    return turn, [result]


def grown(history: History, compactor: Compactor, size: int) -> int:
    """Grow `history` to about `size` messages as a loop does: a step, then the strategies;
    every tenth step the model answers and the user asks again (a new turn)."""
    n = 0
    history.append(ask(n))
    while len(history) < size:
        n += 1
        step(history, compactor, n)
        if n % 10 == 0:
            history.append(Counted(role="assistant", content=[{"type": "text", "text": "Done."}]))
            history.append(ask(n))
    return n


def step(history: History, compactor: Compactor, n: int) -> None:
    turn, results = batch(n)
    history.append(turn)
    for block in results:
        history.add_tool_result(block)
    # The results message the history built is a plain dict: count it too.
    history.rewrite({len(history) - 1: Counted(history.view()[-1])})
    compactor.before_call()


def compactor_for(name: str, history: History) -> Compactor:
    services = CompactionServices(
        emit=lambda event: None,
        summarise=lambda messages, focus: None,  # type: ignore[arg-type,return-value]
        save_output=lambda tool_use_id, text: "saved.txt",
    )
    policy = CompactPolicy(context_limit=10**12)  # never over the limit: per-call work only
    return Compactor(history, services, policy=policy, strategies=[make_strategy(name)])


SLACK = 30
"""Touched messages that may differ with where the call falls in a turn (a turn is 22
messages here); a scan of the history would touch 1,800 more at 2,000 messages."""
