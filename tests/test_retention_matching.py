"""Which facts a text holds, as retention decides it: every fact searched for in one pass over the
text must find exactly what a search of each fact on its own finds."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from evo_magic.analysis.retention.facts import Tracked
from evo_magic.analysis.retention.kept import Matcher
from evo_magic.probe import normalise


def _facts(texts: list[tuple[str, str]]) -> list[Tracked]:
    return [
        Tracked("s", f"{kind}-{n}", kind, text, "given", None, None)
        for n, (kind, text) in enumerate(texts)
    ]


def _one_by_one(facts: list[Tracked], text: str) -> frozenset[int]:
    """Each fact on its own: instructions as typed, the others with whitespace normalised."""
    flat = normalise(text)
    return frozenset(
        i
        for i, fact in enumerate(facts)
        if (fact.text in text if fact.kind == "instruction" else normalise(fact.text) in flat)
    )


def test_overlapping_nested_and_repeated_facts_are_each_found():
    facts = _facts(
        [
            ("path", "src/app.py"),
            ("path", "app.py"),  # inside the one before
            ("identifier", "def load(path)"),
            ("error", "ValueError: bad"),
            ("custom", "ValueError"),  # the start of the one before
            ("instruction", "Never  touch legacy.py."),  # two spaces, matched as typed
            ("custom", "Never touch legacy.py."),
            ("custom", "café ☕ naïve"),
            ("error", "not in any text"),
        ]
    )
    matcher = Matcher(facts)
    texts = [
        "cat src/app.py src/app.py\ndef  load(path):\n    raise ValueError: bad",
        "Please: Never  touch legacy.py. Thanks",
        "Never touch\nlegacy.py.",
        "a café ☕   naïve order",
        "app.p",
        "",
    ]
    for text in texts:
        assert matcher.in_text(text) == _one_by_one(facts, text), text
    assert matcher.in_text(texts[0]) == {0, 1, 2, 3, 4}
    assert matcher.in_text(texts[1]) == {5, 6}  # the verbatim one, and the normalised one
    assert matcher.in_text(texts[2]) == {6}  # across a line break: only when normalised


def test_the_same_text_twice_is_searched_once():
    matcher = Matcher(_facts([("path", "a.py")]))
    for _ in range(3):
        assert matcher.in_text("open a.py") == {0}
    assert matcher.searched == 1


def test_no_facts_hold_nothing():
    assert Matcher([]).in_text("anything at all") == frozenset()


_WORDS = st.sampled_from(["ab", "a", "b", "ba", " ", "  ", "\n", ".", "é", "x"])
_TEXT = st.lists(_WORDS, max_size=12).map("".join)
_FACT = st.tuples(
    st.sampled_from(["instruction", "path", "custom"]),
    _TEXT.filter(lambda t: t.strip()),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_FACT, min_size=1, max_size=8), st.lists(_TEXT, max_size=6))
def test_one_pass_finds_what_each_search_alone_finds(facts_given, texts):
    facts = _facts(facts_given)
    matcher = Matcher(facts)
    for text in texts:
        assert matcher.in_text(text) == _one_by_one(facts, text)
