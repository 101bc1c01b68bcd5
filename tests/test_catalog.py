"""The model catalog (evo_magic/catalog.py): one family rule for every lookup, every figure
sourced, and the docs' price table made from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from evo_magic import catalog
from evo_magic.catalog import (
    FAMILIES,
    FEATURES,
    LONG,
    context_window,
    model_family,
    supports,
)
from evo_magic.catalog_table import catalog_markdown
from evo_magic.cost import DEFAULT_PRICES, call_cost
from evo_magic.models import catalog as models_catalog
from evo_magic.prompt_cache import min_cacheable_tokens, start_key

CLAUDE = [name for name in FAMILIES if name.startswith("claude-")]
GPT = [name for name in FAMILIES if name.startswith("gpt-")]


def claude_ids(family: str) -> list[str]:
    """The ids a Claude family goes by: dated, Vertex, Bedrock (with and without a region),
    a router's vendor prefix, the -latest alias, other case and spacing."""
    return [
        f"{family}-20251001",
        f"{family}@20251001",
        f"anthropic.{family}-20251001-v1:0",
        f"anthropic.{family}-v1",
        f"us.anthropic.{family}-20251001-v1:0",
        f"eu.anthropic.{family}-20251001-v1:0",
        f"anthropic/{family}",
        f"{family}-latest",
        family.upper(),
        f"  {family} ",
    ]


def gpt_ids(family: str) -> list[str]:
    return [f"{family}-2025-08-07", f"openai/{family}", family.upper()]


def every_lookup(model: str) -> dict[str, object]:
    """What each lookup of the project answers for ``model``."""
    return {
        "entry": catalog.lookup(model),
        "price": DEFAULT_PRICES.lookup(model),
        "priced": model in DEFAULT_PRICES,
        "cost": call_cost({"input_tokens": 1_000, "output_tokens": 10}, model),
        "window": context_window(model),
        "legacy window": models_catalog.context_window(model),
        "features": [supports(model, feature) for feature in FEATURES],
        "cache minimum": min_cacheable_tokens(model),
        "cache key": start_key(model),
    }


@pytest.mark.parametrize(
    ("family", "model"),
    [(f, m) for f in CLAUDE for m in claude_ids(f)] + [(f, m) for f in GPT for m in gpt_ids(f)],
)
def test_every_lookup_finds_the_same_family_for_every_id_of_a_model(family: str, model: str):
    assert model_family(model) == family
    assert every_lookup(model) == every_lookup(family)


@pytest.mark.parametrize("family", CLAUDE)
def test_the_1m_tag_changes_the_window_and_nothing_else(family: str):
    tagged = every_lookup(f"{family}[1m]")
    plain = every_lookup(family)
    assert tagged.pop("window") == tagged.pop("legacy window") == LONG
    del plain["window"], plain["legacy window"]
    assert tagged == plain


def test_an_unknown_model_is_unknown_to_every_lookup():
    for model in ("claude-unknown-9", "anthropic.claude-unknown-9-v1:0", "gpt-3.5-turbo", ""):
        assert catalog.lookup(model) is None
        assert DEFAULT_PRICES.lookup(model) is None
        assert min_cacheable_tokens(model) is None
        assert [supports(model, feature) for feature in FEATURES] == [None] * len(FEATURES)
    assert context_window("gpt-3.5-turbo") is None
    # A GPT-5 id the catalog does not list holds the family's window, and nothing else is known.
    assert context_window("gpt-5.4-codex") == 400_000 and catalog.lookup("gpt-5.4-codex") is None


def test_every_figure_says_where_it_comes_from_and_when():
    for entry in FAMILIES.values():
        figures = [
            (entry.price, entry.price_source),
            (entry.window, entry.context_source),
            (entry.features, entry.context_source),
            (entry.cache_minimum, entry.cache_source),
        ]
        for figure, source in figures:
            if figure is not None:
                assert source is not None, entry.name
                assert source.detail and (source.as_of or entry.name == "offline"), entry.name


def markdown_rows() -> dict[str, list[str]]:
    rows = {}
    for line in catalog_markdown().splitlines()[2:]:
        if not line.startswith("| `"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows[cells[0].split("`")[1]] = cells[1:]
    return rows


def test_the_generated_table_shows_each_familys_figures():
    rows = markdown_rows()
    assert list(rows) == list(FAMILIES)
    for name, (window, minimum, *rates_and_sources) in rows.items():
        expected_window = context_window(name)
        assert window.split(" ")[0] == (f"{expected_window:,}" if expected_window else "—")
        expected_minimum = min_cacheable_tokens(name)
        assert minimum.split(" ")[0] == (f"{expected_minimum:,}" if expected_minimum else "—")
        price = DEFAULT_PRICES.lookup(name)
        rates = rates_and_sources[:5]
        if price is None:
            assert rates == ["—"] * 5
        else:
            assert [float(r) for r in rates] == [
                price.input,
                price.output,
                price.cache_write_5m,
                price.cache_write_1h,
                price.cache_read,
            ]
    assert rows["claude-sonnet-5-5"][0] == "200,000 *assumed*"
    assert rows["claude-opus-4-6"][0] == "1,000,000"
    assert rows["claude-haiku-5-5"][1] == "512 *assumed*"
    assert rows["gpt-5"][-2:] == ["OpenAI pricing; OpenAI model pages", "2026-12-04; 2026-12-04"]
    assert "prompts over 100,000 tokens: 0.5 / 2.5 / 0.625 / 1 / 0.05" in catalog_markdown()


def test_the_docs_price_table_is_the_generated_one():
    page = (Path(__file__).parent.parent / "docs" / "caching-cost.md").read_text()
    # A changed catalog: python -m evo_magic.doc_tables docs/caching-cost.md
    assert catalog_markdown() in page, "python -m evo_magic.doc_tables docs/caching-cost.md"


@pytest.mark.parametrize(
    ("model", "family"),
    [
        # ids seen in real Claude Code, Codex and research trajectories
        ("converse/jp.anthropic.claude-haiku-4-5-20251001-v1:0", "claude-haiku-4-5"),
        ("gpt-5-1-codex-2025-11-13", "gpt-5.1-codex"),
        ("gpt-5.5", "gpt-5.5"),
        ("openrouter/anthropic/claude-sonnet-4.5", "claude-sonnet-4-5"),
        ("anthropic/claude-3.7-sonnet", "claude-3-7-sonnet"),
        ("claude-3-5-sonnet-20241022", "claude-3-5-sonnet"),
        ("vertex_ai/claude-3-7-sonnet@20250219", "claude-3-7-sonnet"),
        ("gemini-3-pro-preview", "gemini-3-pro"),
        ("models/gemini-2.5-pro", "gemini-2.5-pro"),
        ("gemini-2.5-flash-preview-05-20", "gemini-2.5-flash"),
        ("deepseek/deepseek-chat", "deepseek-chat"),
        ("deepseek-r1", "deepseek-reasoner"),
        ("qwen/qwen3-coder-plus", "qwen3-coder-plus"),
        ("z-ai/glm-4.6", "glm-4.6"),
        ("moonshotai/kimi-k2-0905-preview", "kimi-k2"),
        ("kimi-k2.5", "kimi-k2.5"),
    ],
)
def test_the_ids_of_the_fields_transcripts_find_a_priced_family(model: str, family: str):
    assert model_family(model) == family
    assert DEFAULT_PRICES.lookup(model) is DEFAULT_PRICES.lookup(family) is not None


def test_a_model_priced_by_the_prompts_band_bills_the_whole_call_at_the_highest_band_passed():
    # qwen3-coder-plus: $1 up to 32K, $1.8 to 128K, $3 to 256K, $6 beyond (input, per MTok).
    def cost(tokens: int) -> float:
        priced = call_cost({"input_tokens": tokens}, "qwen3-coder-plus")
        assert priced is not None
        return priced.total

    assert cost(32_000) == pytest.approx(0.032)
    assert cost(32_001) == pytest.approx(32_001 * 1.8 / 1e6)
    assert cost(200_000) == pytest.approx(0.6)
    assert cost(300_000) == pytest.approx(1.8)
    # gpt-5.5 doubles its input rate over 272,000 prompt tokens
    long = call_cost({"input_tokens": 272_001, "output_tokens": 1_000}, "gpt-5.5")
    assert long is not None and long.total == pytest.approx(272_001 * 10 / 1e6 + 1_000 * 45 / 1e6)


def test_every_band_of_a_banded_model_is_in_the_table():
    assert (
        "`qwen3-coder-plus` (prompts over 32,000 tokens: 1.8 / 9 / 1.8 / 1.8 / 0.36) "
        "(prompts over 128,000 tokens: 3 / 15 / 3 / 3 / 0.6) "
        "(prompts over 256,000 tokens: 6 / 60 / 6 / 6 / 1.2)"
    ) in catalog_markdown()
