"""The price table and the pricing of one call's usage (evo_magic/cost.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from anthropic.types import CacheCreation
from anthropic.types import Usage as SdkUsage

from evo_magic.cost import (
    DEFAULT_PRICES,
    PRICES_AS_OF,
    Price,
    PriceTable,
    call_cost,
    model_family,
    price_table,
    unpriced_notice,
    validate_prices,
)
from evo_magic.models.anthropic import DEFAULT_MODEL
from evo_magic.usage import Usage

M = 1_000_000
# Distinct rates, so a token priced at the wrong rate shows in the total.
RATES = Price(input=3, output=17, cache_write_5m=5, cache_write_1h=11, cache_read=0.25)
TABLE = PriceTable({"claude-test-1": RATES}, as_of="2026-01-01", source="test")

CURRENT_MODELS = [
    "claude-opus-4-5-20251101",
    "claude-sonnet-4-5-20250929",
    "claude-haiku-4-5-20251001",
    "claude-opus-4-6",
    "claude-sonnet-4-6",
    "claude-opus-4-7",
    "claude-opus-4-8",
    "claude-opus-5",
    "claude-sonnet-5",
    "claude-fable-5",
    "claude-mythos-5",
    "claude-fable-5-1",
    "claude-mythos-5-1",
    "claude-opus-5-5",
    "claude-sonnet-5-5",
    "claude-haiku-5-5",
    "claude-fable-5-2",
    "claude-mythos-5-2",
]


@pytest.mark.parametrize("model", [*CURRENT_MODELS, DEFAULT_MODEL])
def test_every_current_model_and_the_default_has_a_price(model: str) -> None:
    price = DEFAULT_PRICES.lookup(model)
    assert price is not None
    assert price.output > price.input > price.cache_read > 0
    assert price.cache_write_1h > price.cache_write_5m > price.input
    assert model in DEFAULT_PRICES


def test_the_table_says_when_and_where_its_prices_come_from() -> None:
    assert DEFAULT_PRICES.as_of == PRICES_AS_OF
    assert "platform.claude.com" in DEFAULT_PRICES.source
    assert len(DEFAULT_PRICES.models()) == len(DEFAULT_PRICES) >= len(CURRENT_MODELS) - 3


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-sonnet-4-5@20250929", "claude-sonnet-4-5"),
        ("anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"),
        ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"),
        ("anthropic.claude-opus-4-6-v1", "claude-opus-4-6"),
        ("claude-sonnet-5-5[1m]", "claude-sonnet-5-5"),
        ("Claude-Opus-5", "claude-opus-5"),
        ("claude-3-5-haiku-latest", "claude-3-5-haiku"),
        ("claude-opus-4-0", "claude-opus-4"),
        ("claude-opus-4-1", "claude-opus-4-1"),
        ("claude-fable-5-20260609", "claude-fable-5"),
        ("claude-fable-5-2", "claude-fable-5-2"),
    ],
)
def test_model_ids_map_to_their_family(model: str, family: str) -> None:
    assert model_family(model) == family


def test_a_dated_id_never_lands_on_a_neighbouring_model() -> None:
    # Fable 5 and Fable 5.2 are priced differently: a date must not turn one into the other.
    dated = DEFAULT_PRICES.lookup("claude-fable-5-20260609")
    assert dated == DEFAULT_PRICES.lookup("claude-fable-5")
    assert dated != DEFAULT_PRICES.lookup("claude-fable-5-2")


def test_each_kind_of_token_is_priced_at_its_rate() -> None:
    usage = {
        "input_tokens": 2 * M,
        "output_tokens": 3 * M,
        "cache_read_input_tokens": 4 * M,
        "cache_creation_input_tokens": 5 * M,
        "cache_creation": {"ephemeral_5m_input_tokens": 3 * M, "ephemeral_1h_input_tokens": 2 * M},
    }
    cost = call_cost(usage, "claude-test-1", TABLE)
    assert cost is not None
    assert cost.input == 2 * RATES.input
    assert cost.output == 3 * RATES.output
    assert cost.cache_read == 4 * RATES.cache_read
    assert cost.cache_write_5m == 3 * RATES.cache_write_5m
    assert cost.cache_write_1h == 2 * RATES.cache_write_1h
    assert cost.cache_write == cost.cache_write_5m + cost.cache_write_1h
    assert cost.total == pytest.approx(
        cost.input + cost.output + cost.cache_read + cost.cache_write
    )
    # The session's own Usage is priced as it is, with its TTL split.
    assert call_cost(Usage.from_api(usage), "claude-test-1", TABLE) == cost


def test_writes_without_a_ttl_split_are_priced_as_five_minute() -> None:
    usage = {"input_tokens": 10, "output_tokens": 0, "cache_creation_input_tokens": M}
    cost = call_cost(usage, "claude-test-1", TABLE)
    assert cost is not None
    assert (cost.cache_write_5m, cost.cache_write_1h) == (RATES.cache_write_5m, 0)


def test_the_sdk_usage_object_is_priced_with_its_ttl_split() -> None:
    usage = SdkUsage(
        input_tokens=1_000,
        output_tokens=500,
        cache_read_input_tokens=40_000,
        cache_creation_input_tokens=3_000,
        cache_creation=CacheCreation(
            ephemeral_5m_input_tokens=1_000, ephemeral_1h_input_tokens=2_000
        ),
    )
    read = Usage.from_api(usage)
    assert read == Usage(1_000, 500, 3_000, 40_000, 1_000, 2_000)
    assert read.cache_writes() == (1_000, 2_000)
    price = DEFAULT_PRICES.lookup(DEFAULT_MODEL)
    assert price is not None
    cost = call_cost(usage, DEFAULT_MODEL)
    assert cost is not None
    expected = (
        1_000 * price.input
        + 500 * price.output
        + 40_000 * price.cache_read
        + 1_000 * price.cache_write_5m
        + 2_000 * price.cache_write_1h
    ) / M
    assert cost.total == pytest.approx(expected)


def test_usage_without_cache_fields_and_with_nones_reads_as_zeros() -> None:
    class Plain:
        input_tokens = 7
        output_tokens = 3
        cache_creation_input_tokens = None
        cache_read_input_tokens = None

    assert Usage.from_api(Plain()) == Usage(input_tokens=7, output_tokens=3)
    assert Usage.from_api({}) == Usage()
    assert Usage.from_api({"cache_creation_input_tokens": 9}).cache_writes() == (9, 0)


def test_a_split_that_disagrees_with_the_total_keeps_the_total() -> None:
    usage = {
        "cache_creation_input_tokens": 900,
        "cache_creation": {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 300},
    }
    assert Usage.from_api(usage).cache_writes() == (600, 300)
    # A sum of calls where only some reported the split: every written token priced once.
    summed = Usage(cache_creation_input_tokens=100) + Usage.from_api(usage)
    assert summed.cache_writes() == (700, 300)
    cost = call_cost(summed, "claude-test-1", TABLE)
    assert cost is not None
    assert cost.cache_write == pytest.approx((700 * 5 + 300 * 11) / M)


def test_flat_ttl_fields_are_read_too() -> None:
    class Flat:
        cache_creation_input_tokens = 50
        ephemeral_1h_input_tokens = 50

    assert Usage.from_api(Flat()).cache_writes() == (0, 50)


def test_bad_usage_values_are_refused_with_the_field_named() -> None:
    with pytest.raises(ValueError, match="input_tokens"):
        Usage.from_api({"input_tokens": -1})
    with pytest.raises(ValueError, match="output_tokens"):
        Usage.from_api({"output_tokens": "12"})


def test_haiku_5_5_long_prompts_are_billed_at_the_higher_band() -> None:
    price = DEFAULT_PRICES.lookup("claude-haiku-5-5")
    assert price is not None and price.long_prompt is not None
    band = price.long_prompt
    limit = band.threshold_tokens
    at_limit = {"input_tokens": limit - 1_000, "cache_read_input_tokens": 1_000, "output_tokens": M}
    over = {**at_limit, "input_tokens": limit - 999}
    base_cost = call_cost(at_limit, "claude-haiku-5-5")
    long_cost = call_cost(over, "claude-haiku-5-5")
    assert base_cost is not None and long_cost is not None
    assert base_cost.output == price.output
    assert long_cost.output == band.price.output  # output too is billed at the higher band
    assert long_cost.input == (limit - 999) * band.price.input / M
    assert long_cost.cache_read == 1_000 * band.price.cache_read / M


@pytest.mark.parametrize("model", ["claude-unknown-9", "<synthetic>", "gpt-4-turbo", ""])
def test_an_unknown_model_has_no_cost(model: str) -> None:
    assert call_cost({"input_tokens": 100}, model) is None
    assert model not in DEFAULT_PRICES


def test_overrides_change_only_the_rates_given() -> None:
    before = DEFAULT_PRICES.lookup("claude-sonnet-5-5")
    table = DEFAULT_PRICES.with_overrides({"claude-sonnet-5-5-20261001": {"cache_read": 0.5}})
    after = table.lookup("claude-sonnet-5-5")
    assert before is not None and after is not None
    assert after.cache_read == 0.5
    assert (after.input, after.output, after.cache_write_5m) == (
        before.input,
        before.output,
        before.cache_write_5m,
    )
    assert DEFAULT_PRICES.lookup("claude-sonnet-5-5") == before  # the shipped table is untouched
    assert "user overrides" in table.source


def test_a_new_model_gets_the_standard_cache_multipliers() -> None:
    table = DEFAULT_PRICES.with_overrides({"my-proxy-model": {"input": 4, "output": 12}})
    price = table.lookup("my-proxy-model")
    assert price == Price(4, 12, 4 * 1.25, 4 * 2, 4 * 0.1)
    replaced = TABLE.with_overrides({"claude-test-1": Price.standard(1, 2)})
    assert replaced.lookup("claude-test-1") == Price.standard(1, 2)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"claude-opus-5": {"cache_reads": 1}}, r"claude-opus-5.*unknown field.*cache_reads"),
        ({"claude-opus-5": {"input": -1}}, r"claude-opus-5.*input.*from 0 to 10,000"),
        ({"claude-opus-5": {"input": 1e308}}, r"claude-opus-5.*input.*from 0 to 10,000"),
        ({"brand-new": {"input": 1e30, "output": 1}}, r"brand-new.*from 0 to 10,000"),
        ({"claude-opus-5": {"cache_read": float("inf")}}, r"claude-opus-5.*cache_read"),
        ({"claude-opus-5": {"output": "cheap"}}, r"claude-opus-5.*output.*number"),
        ({"claude-opus-5": {"output": float("nan")}}, r"claude-opus-5.*output"),
        ({"brand-new": {"input": 1}}, r"brand-new.*needs \['output'\]"),
        ({"claude-opus-5": 3}, r"claude-opus-5.*Price or a mapping"),
        ({"": {"input": 1, "output": 2}}, r"model id"),
        ({"claude-opus-5": {"long_prompt": 2}}, r"claude-opus-5.*LongPromptTier"),
    ],
)
def test_bad_overrides_get_a_clear_error(overrides: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DEFAULT_PRICES.with_overrides(overrides)


def test_importing_the_modules_stays_cheap() -> None:
    code = (
        "import sys, evo_magic.cost, evo_magic.prompt_cache; "
        "heavy = [m for m in ('anthropic', 'pandas', 'IPython') if m in sys.modules]; "
        "print(heavy)"
    )
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=root, check=True
    )
    assert out.stdout.strip() == "[]"


# OpenAI's rates per million tokens (input, cached input, output), as read on the model pages and
# tables named in the module (see PRICES_SOURCE): each Codex model id is found, cached input is
# its cache-read rate, and writing the cache costs what input costs (OpenAI bills no writes).
OPENAI = {
    "gpt-5": (1.25, 0.125, 10),
    "gpt-5-2025-08-07": (1.25, 0.125, 10),
    "gpt-5-codex": (1.25, 0.125, 10),
    "gpt-5-mini": (0.25, 0.025, 2),
    "gpt-5-nano": (0.05, 0.005, 0.40),
    "gpt-5.1": (1.25, 0.125, 10),
    "gpt-5.1-codex": (1.25, 0.125, 10),
    "gpt-5.1-codex-max": (1.25, 0.125, 10),
    "gpt-5.1-codex-mini": (0.25, 0.025, 2),
    "gpt-5.2": (1.75, 0.175, 14),
    "gpt-5.2-codex": (1.75, 0.175, 14),
    "gpt-5.3-codex": (1.75, 0.175, 14),
    "openai/gpt-5-mini": (0.25, 0.025, 2),
}


@pytest.mark.parametrize(("model", "rates"), OPENAI.items())
def test_the_gpt_5_family_is_priced_with_its_cached_input_rate(model: str, rates: tuple) -> None:
    price = DEFAULT_PRICES.lookup(model)
    assert price is not None, model
    assert (price.input, price.cache_read, price.output) == rates
    assert price.cache_write_5m == price.cache_write_1h == price.input
    # A Codex call: 10,000 prompt tokens of which 8,000 read from the cache, 500 out.
    cost = call_cost(
        {"input_tokens": 2_000, "cache_read_input_tokens": 8_000, "output_tokens": 500}, model
    )
    assert cost is not None
    assert cost.total == pytest.approx((2_000 * rates[0] + 8_000 * rates[1] + 500 * rates[2]) / M)
    assert "openai" in DEFAULT_PRICES.source.lower() and "2026-12-04" in DEFAULT_PRICES.source


def test_an_unpriced_model_is_na_with_exactly_one_notice() -> None:
    assert call_cost({"input_tokens": 10, "output_tokens": 1}, "gpt-9-hypothetical") is None
    notice = unpriced_notice(["gpt-9-hypothetical", "gpt-5", None, "gpt-9-hypothetical", "x-1"])
    assert notice is not None
    assert notice.count("No price") == 1
    assert "'gpt-9-hypothetical'" in notice and "'x-1'" in notice and "'gpt-5'" not in notice
    assert unpriced_notice(["gpt-5.3-codex", "claude-opus-5"]) is None


@pytest.mark.parametrize("rate", [1e308, float("inf"), float("nan"), -0.5, 10_000.01])
def test_an_insane_rate_is_refused_everywhere_it_can_enter(rate: float) -> None:
    with pytest.raises(ValueError, match="input"):
        Price(input=rate, output=1, cache_write_5m=1, cache_write_1h=1, cache_read=1)
    with pytest.raises(ValueError, match="'my-model'.*from 0 to 10,000"):
        price_table({"my-model": {"input": rate, "output": 1}})
    with pytest.raises(ValueError, match="claude-opus-5"):
        validate_prices({"claude-opus-5": {"input": rate}})
    # The bound itself is a rate.
    bound = {"input": 10_000, "output": 1, "cache_write_5m": 1, "cache_write_1h": 1}
    assert price_table({"my-model": bound}).lookup("my-model") is not None


def test_validate_prices_returns_a_valid_setting_unchanged() -> None:
    setting = {"claude-opus-5": {"cache_read": 0.2}}
    assert validate_prices(setting) is setting
    assert validate_prices(None) is None
    with pytest.raises(ValueError, match="PriceTable or a mapping"):
        validate_prices(["claude-opus-5"])
