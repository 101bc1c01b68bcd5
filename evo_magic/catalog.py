"""The model catalog: what the project knows of each model family, and where it read it.

One entry (`Family`) per model family holds its context window, the API's context features it
accepts, its minimum cacheable prompt length and its prices, each with its `Source` (what was
read, and when). `model_family` is the one rule that maps any id of a model to its family: every
lookup goes through it (`lookup`, `context_window`, `supports`, `min_cacheable_tokens`, and the
price table of `evo_magic.cost` built from `prices()`), so a dated or cloud id finds the same
row for every figure.

Where the figures come from:

- Claude prices: Anthropic's pricing and model pages, read on ``PRICES_AS_OF``. Two later changes
  were taken from price trackers that re-read the live pricing page, as the copy of the official
  page we could read predates them: Claude Sonnet 5.5 cache reads cut from $0.20 to $0.10 per
  million tokens on 2026-10-07; Claude Fable 5.2 and Claude Mythos 5.2 (released 2026-11-09) at
  $8 / $40, cache writes $10 (5m) and $16 (1h), cache reads $0.20. Claude Haiku 5.5 has a second
  band for prompts over 100,000 tokens (`LongPromptTier`).
- OpenAI's GPT-5 family (the models of Codex sessions): OpenAI's model pages, read on
  ``OPENAI_PRICES_AS_OF``; rates missing there (gpt-5-mini, gpt-5.2, gpt-5.2-codex,
  gpt-5.3-codex) from GitHub's table of the models' OpenAI list prices, and gpt-5.1-codex-mini
  from OpenRouter's listing, its cached input at the family's 10%. OpenAI bills no cache writes:
  a cached prefix is written at the input rate and read at the "cached input" rate. Codex
  variants without a page of their own (gpt-5.1-codex, gpt-5.1-codex-max) are priced as their
  base model, as OpenAI lists the codex models it prices.
- Windows and features: the platform's compaction and context editing pages ("Supported
  models") and the context-windows page, read on ``AS_OF``. Claude models hold 200,000 tokens,
  except those listed with 1,000,000; a ``[1m]`` tag on the name (as Claude Code writes it) means
  1,000,000 too. Models newer than every model those pages list are assumed to support what
  their predecessors do (their source says ``assumed``). OpenAI's GPT-5 family holds 400,000
  (any GPT-5 id, listed or not); its features are not known (None: the feature is tried, and a
  rejection falls back), as for any model the catalog does not list.
- Minimum cacheable prompt lengths: the prompt-caching page (512 from Claude Opus 5 and Fable 5
  on, in the list of October 2026). Haiku 5.5 and the 5.2 models are not in the list we could
  read: their line's 512 is assumed.

`evo_magic.catalog_table` writes the catalog as the docs' price table; `evo_magic.model_ids`
holds `model_family`, the rule from a model's id to its family.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from evo_magic.model_ids import model_family
from evo_magic.price import LongPromptTier, Price

__all__ = [
    "AS_OF",
    "CLEAR_THINKING",
    "CLEAR_TOOL_USES",
    "COMPACT_EDIT",
    "FAMILIES",
    "FEATURES",
    "GPT_5_WINDOW",
    "LONG",
    "MIN_CACHEABLE_TOKENS",
    "MODELS",
    "OPENAI_PRICES_AS_OF",
    "OPENAI_PRICES_SOURCE",
    "PRICES_AS_OF",
    "PRICES_SOURCE",
    "SOURCE",
    "SUMMARIZE",
    "Family",
    "ModelInfo",
    "Source",
    "context_window",
    "lookup",
    "min_cacheable_tokens",
    "model_family",
    "model_info",
    "prices",
    "supports",
]

# --------------------------------------------------------------------------- sources

PRICES_AS_OF = "2026-12-03"
PRICES_SOURCE = (
    "Anthropic pricing and model overview pages (platform.claude.com/docs/en/about-claude/pricing, "
    "platform.claude.com/docs/en/models/<model>/overview), read 2026-12-03; Sonnet 5.5 cache-read "
    "cut (2026-10-07) and Fable/Mythos 5.2 rates (2026-11-09) from price trackers checked against "
    "the live page on 2026-12-01"
)

OPENAI_PRICES_AS_OF = "2026-12-04"
OPENAI_PRICES_SOURCE = (
    "OpenAI model pages (developers.openai.com/api/docs/models/gpt-5, gpt-5-codex, gpt-5-nano, "
    "gpt-5.1), GitHub's table of OpenAI list prices (github/docs "
    "data/tables/copilot/models-and-pricing.yml: gpt-5-mini, gpt-5.2, gpt-5.2-codex, "
    "gpt-5.3-codex), OpenRouter (gpt-5.1-codex-mini), read 2026-12-04"
)

FIELD_PRICES_AS_OF = "2026-12-05"
"""When the rates of the field's other models (Gemini, DeepSeek, Qwen, GLM, Kimi, GPT-5.4/5.5,
Claude 3.x) were read."""
_FIELD = {
    "gpt-5.5": "OpenAI pricing page (developers.openai.com/api/docs/pricing) as quoted by price "
    "trackers (benchr.org, spendwall.app): $5 / $30, cached $0.50; prompts over 272,000 tokens "
    "$10 / $45, cached $1; not read on OpenAI's own page here",
    "gpt-5.4": "OpenAI pricing page as quoted by plausiblereality.com: $2.50 / $15, cached $0.25; "
    "not read on OpenAI's own page here",
    "gpt-4o": "OpenAI's earlier pricing page (openai.com/api/pricing) as kept in the openai-models "
    "crate and price trackers: gpt-4o $2.50 / $10, cached $1.25; gpt-4o-mini $0.15 / $0.60, cached "
    "$0.075 (OpenAI's current page no longer lists them; still billable)",
    "claude-3": "Anthropic pricing page, legacy models (Claude 3.7 Sonnet and 3.5 Sonnet $3 / $15, "
    "Claude 3 Opus $15 / $75, Claude 3 Haiku $0.25 / $1.25), with the standard cache multipliers",
    "gemini": "Gemini Developer API pricing (ai.google.dev/gemini-api/docs/pricing), paid tier, "
    "as quoted on Google's developer forum (Gemini 2.5 Pro: $1.25 / $10, cached $0.125; over "
    "200,000 prompt tokens $2.50 / $15, cached $0.25) and by price trackers for Gemini 2.5 "
    "Flash ($0.30 / $2.50, cached $0.03) and Gemini 3 Pro ($2 / $12, cached $0.20; over 200,000 "
    "$4 / $18, cached $0.40); implicit caching writes nothing extra, explicit cache storage "
    "(per hour) is not modelled",
    "deepseek": "DeepSeek API docs, Models & Pricing (api-docs.deepseek.com/quick_start/"
    "pricing-details-usd): deepseek-chat $0.27 cache miss, $0.07 cache hit, $1.10 output; "
    "deepseek-reasoner $0.55 / $0.14 / $2.19 (the page as stored; later reductions not confirmed)",
    "qwen": "Alibaba Cloud Model Studio, Qwen-Coder (alibabacloud.com/help/en/model-studio/"
    "qwen-coder), international: qwen3-coder-plus billed by the prompt's band, up to 32K $1 / "
    "$5, 32K-128K $1.8 / $9, 128K-256K $3 / $15, over 256K $6 / $60, cache hits at 20% of input "
    "(the band structure and the 20% confirmed on the mainland-China page; the USD rates not "
    "confirmed here)",
    "glm": "Z.ai pricing (docs.z.ai): GLM-4.5 and GLM-4.6 $0.60 / $2.20, cache hits at one fifth "
    "($0.11, Z.ai FAQ); GLM-4.5-Air $0.20 / $1.10, cached $0.03 (not confirmed here)",
    "kimi": "Moonshot AI pricing (platform.moonshot.ai/docs/pricing/chat, archived 2026-03-26): "
    "kimi-k2 (0905 and 0711 previews) $0.60 cache miss, $0.15 cache hit, $2.50 output; "
    "kimi-k2.5 $0.60 / $0.10 / $3.00",
}
FIELD_PRICES_SOURCE = "; ".join(f"{name}: {text}" for name, text in _FIELD.items())

AS_OF = "2026-12-04"
"""When the windows and features were read."""
_CLAUDE_CONTEXT_PAGES = (
    "platform.claude.com/docs: build-with-claude/compaction (supported models: Mythos "
    "Preview, Opus 4.7, Opus 4.6, Sonnet 4.6), build-with-claude/context-editing (clearing "
    "edits on every Claude 4 model and later), build-with-claude/context-windows (the "
    "1,000,000-token models, as quoted on 2026-12-04)"
)
_OPENAI_WINDOW_PAGE = "OpenAI's models page (GPT-5: 400,000)"
SOURCE = f"{_CLAUDE_CONTEXT_PAGES}; {_OPENAI_WINDOW_PAGE}"
"""Where the windows and features come from."""

CACHE_AS_OF = "2026-12-03"
_CACHE_PAGE = (
    "platform.claude.com/docs/en/build-with-claude/prompt-caching (minimum cacheable prompt "
    "length, the list of October 2026), read 2026-12-03"
)


@dataclass(frozen=True)
class Source:
    """Where a figure of the catalog comes from: a short ``name`` for tables, the date it was
    read (``as_of``, None for the project's own figures) and the full citation (``detail``)."""

    name: str
    as_of: str | None
    detail: str
    assumed: bool = False
    """True for a figure the source does not list for this model: assumed from its line's
    documented predecessors."""


ANTHROPIC_PRICING = Source("Anthropic pricing", PRICES_AS_OF, PRICES_SOURCE)
OPENAI_PRICING = Source("OpenAI pricing", OPENAI_PRICES_AS_OF, OPENAI_PRICES_SOURCE)
FIELD_PRICING = Source("field models' pricing", FIELD_PRICES_AS_OF, FIELD_PRICES_SOURCE)
OFFLINE_PRICING = Source("evo_magic", None, "the offline scripted stand-in: nothing is billed")
CLAUDE_CONTEXT = Source("Claude context docs", AS_OF, _CLAUDE_CONTEXT_PAGES)
CLAUDE_CONTEXT_ASSUMED = Source("Claude context docs", AS_OF, _CLAUDE_CONTEXT_PAGES, True)
OPENAI_WINDOWS = Source("OpenAI model pages", AS_OF, _OPENAI_WINDOW_PAGE)
CLAUDE_CACHING = Source("Claude caching docs", CACHE_AS_OF, _CACHE_PAGE)
CLAUDE_CACHING_ASSUMED = Source("Claude caching docs", CACHE_AS_OF, _CACHE_PAGE, True)

# --------------------------------------------------------------------------- context features

LONG = 1_000_000
"""The window of the 1,000,000-token Claude models (and of any Claude id tagged ``[1m]``)."""
GPT_5_WINDOW = 400_000

COMPACT_EDIT = "compact_20260112"
"""Automatic compaction (`context_management.edits`), beta compact-2026-01-12."""
SUMMARIZE = "summarize"
"""On-demand compaction (the top-level `compaction` parameter), beta compact-2026-09-04."""
CLEAR_TOOL_USES = "clear_tool_uses_20250919"
CLEAR_THINKING = "clear_thinking_20251015"
FEATURES: tuple[str, ...] = (COMPACT_EDIT, SUMMARIZE, CLEAR_TOOL_USES, CLEAR_THINKING)

# --------------------------------------------------------------------------- the families


@dataclass(frozen=True)
class Family:
    """What the catalog knows of one model family; None where it does not know."""

    name: str
    """The family id, as `model_family` gives it."""
    price: Price | None = None
    price_source: Source | None = None
    window: int | None = None
    """The context window in input tokens."""
    features: frozenset[str] | None = None
    """The context features (of `FEATURES`) it accepts; None: not known (tried, falls back)."""
    context_source: Source | None = None
    """Where the window and the features come from."""
    cache_minimum: int | None = None
    """The minimum cacheable prompt length in tokens, on the Claude API."""
    cache_source: Source | None = None


_ALL = frozenset(FEATURES)
_CLEARING = frozenset({CLEAR_TOOL_USES, CLEAR_THINKING})


def _claude(
    name: str,
    price: Price | None,
    window: int,
    features: frozenset[str],
    cache_minimum: int,
    *,
    context: Source = CLAUDE_CONTEXT,
    cache: Source = CLAUDE_CACHING,
) -> Family:
    return Family(
        name,
        price=price,
        price_source=None if price is None else ANTHROPIC_PRICING,
        window=window,
        features=features,
        context_source=context,
        cache_minimum=cache_minimum,
        cache_source=cache,
    )


def _gpt(name: str, price: Price, source: Source = OPENAI_PRICING) -> Family:
    return Family(name, price, source, GPT_5_WINDOW, context_source=OPENAI_WINDOWS)


def _priced(name: str, price: Price, source: Source = FIELD_PRICING) -> Family:
    """A family the catalog knows only the price of (its window and features unknown)."""
    return Family(name, price, source)


def _banded(bands: list[tuple[int, Price]], first: Price) -> Price:
    """`first`, with a higher band for each (threshold, price) in ascending order."""
    price = None
    for threshold, band in reversed(bands):
        band = replace(band, long_prompt=price)
        price = LongPromptTier(threshold, band)
    return replace(first, long_prompt=price)


def _row(input: float, output: float, write_5m: float, write_1h: float, read: float) -> Price:
    return Price(input, output, write_5m, write_1h, read)


def _openai(input: float, output: float, cached: float) -> Price:
    """An OpenAI rate: cache writes are billed as input (OpenAI charges nothing extra)."""
    return Price(input, output, input, input, cached)


_FABLE_5_2 = _row(8, 40, 10, 16, 0.20)
_FABLE_5_1 = _row(10, 50, 12.50, 20, 0.25)
_FABLE_5 = _row(10, 50, 12.50, 20, 1.00)
_OPUS_5_5 = _row(4, 20, 5, 8, 0.20)
_OPUS_4_5_TO_5 = _row(5, 25, 6.25, 10, 0.50)
_OPUS_4 = _row(15, 75, 18.75, 30, 1.50)
_SONNET_5_5 = _row(2, 10, 2.50, 4, 0.10)
_SONNET_5 = _row(2, 10, 2.50, 4, 0.20)
_SONNET_4 = _row(3, 15, 3.75, 6, 0.30)
_HAIKU_5_5 = Price(
    0.10,
    0.50,
    0.125,
    0.20,
    0.01,
    long_prompt=LongPromptTier(100_000, _row(0.50, 2.50, 0.625, 1.00, 0.05)),
)
_HAIKU_4_5 = _row(1, 5, 1.25, 2, 0.10)
_HAIKU_3_5 = _row(0.80, 4, 1, 1.60, 0.08)
_GPT_5 = _openai(1.25, 10, 0.125)
_GPT_5_MINI = _openai(0.25, 2, 0.025)
_GPT_5_NANO = _openai(0.05, 0.40, 0.005)
_GPT_5_2 = _openai(1.75, 14, 0.175)
_GPT_5_4 = _openai(2.50, 15, 0.25)
_GPT_4O = _openai(2.50, 10, 1.25)
_GPT_4O_MINI = _openai(0.15, 0.60, 0.075)
_GPT_5_5 = _banded([(272_000, _openai(10, 45, 1.0))], _openai(5, 30, 0.50))
_SONNET_3 = _row(3, 15, 3.75, 6, 0.30)
_OPUS_3 = _row(15, 75, 18.75, 30, 1.50)
_HAIKU_3 = _row(0.25, 1.25, 0.30, 0.50, 0.03)
# Providers without cache writes bill a cached prefix as it is written at the input rate.
_GEMINI_2_5_PRO = _banded([(200_000, _openai(2.50, 15, 0.25))], _openai(1.25, 10, 0.125))
_GEMINI_2_5_FLASH = _openai(0.30, 2.50, 0.03)
_GEMINI_3_PRO = _banded([(200_000, _openai(4, 18, 0.40))], _openai(2, 12, 0.20))
_DEEPSEEK_CHAT = _openai(0.27, 1.10, 0.07)
_DEEPSEEK_REASONER = _openai(0.55, 2.19, 0.14)
_QWEN3_CODER_PLUS = _banded(
    [
        (32_000, _openai(1.8, 9, 0.36)),
        (128_000, _openai(3, 15, 0.60)),
        (256_000, _openai(6, 60, 1.20)),
    ],
    _openai(1, 5, 0.20),
)
_GLM_4_5 = _openai(0.60, 2.20, 0.11)
_GLM_4_5_AIR = _openai(0.20, 1.10, 0.03)
_KIMI_K2 = _openai(0.60, 2.50, 0.15)
_KIMI_K2_5 = _openai(0.60, 3.00, 0.10)

_NEW = CLAUDE_CONTEXT_ASSUMED  # newer than every model the context pages list
_NEW_CACHE = CLAUDE_CACHING_ASSUMED  # not in the caching page's list

_ENTRIES = (
    # family, price, window, features, minimum cacheable tokens
    _claude("claude-fable-5-2", _FABLE_5_2, 200_000, _ALL, 512, context=_NEW, cache=_NEW_CACHE),
    _claude("claude-mythos-5-2", _FABLE_5_2, 200_000, _ALL, 512, context=_NEW, cache=_NEW_CACHE),
    _claude("claude-fable-5-1", _FABLE_5_1, LONG, _ALL, 512, context=_NEW),
    _claude("claude-mythos-5-1", _FABLE_5_1, LONG, _ALL, 512, context=_NEW),
    _claude("claude-fable-5", _FABLE_5, LONG, _ALL, 512, context=_NEW),
    _claude("claude-mythos-5", _FABLE_5, LONG, _ALL, 512, context=_NEW),
    _claude("claude-opus-5-5", _OPUS_5_5, 200_000, _ALL, 512, context=_NEW),
    _claude("claude-opus-5", _OPUS_4_5_TO_5, LONG, _ALL, 512, context=_NEW),
    _claude("claude-opus-4-8", _OPUS_4_5_TO_5, LONG, _ALL, 1024, context=_NEW),
    _claude("claude-mythos-preview", None, 200_000, _ALL, 2048),
    _claude("claude-opus-4-7", _OPUS_4_5_TO_5, LONG, _ALL, 2048),
    _claude("claude-opus-4-6", _OPUS_4_5_TO_5, LONG, _ALL, 4096),
    _claude("claude-opus-4-5", _OPUS_4_5_TO_5, 200_000, _CLEARING, 4096),
    _claude("claude-opus-4-1", _OPUS_4, 200_000, _CLEARING, 1024),
    _claude("claude-opus-4", _OPUS_4, 200_000, _CLEARING, 1024),
    _claude("claude-sonnet-5-5", _SONNET_5_5, 200_000, _ALL, 512, context=_NEW),
    _claude("claude-sonnet-5", _SONNET_5, LONG, _ALL, 1024, context=_NEW),
    _claude("claude-sonnet-4-6", _SONNET_4, LONG, _ALL, 1024),
    _claude("claude-sonnet-4-5", _SONNET_4, 200_000, _CLEARING, 1024),
    _claude("claude-sonnet-4", _SONNET_4, 200_000, _CLEARING, 1024),
    _claude("claude-haiku-5-5", _HAIKU_5_5, 200_000, _ALL, 512, context=_NEW, cache=_NEW_CACHE),
    _claude("claude-haiku-4-5", _HAIKU_4_5, 200_000, _CLEARING, 4096),
    _claude("claude-3-5-haiku", _HAIKU_3_5, 200_000, frozenset(), 2048),
    _gpt("gpt-5", _GPT_5),
    _gpt("gpt-5-codex", _GPT_5),
    _gpt("gpt-5-mini", _GPT_5_MINI),
    _gpt("gpt-5-nano", _GPT_5_NANO),
    _gpt("gpt-5.1", _GPT_5),
    _gpt("gpt-5.1-codex", _GPT_5),
    _gpt("gpt-5.1-codex-max", _GPT_5),
    _gpt("gpt-5.1-codex-mini", _GPT_5_MINI),
    _gpt("gpt-5.2", _GPT_5_2),
    _gpt("gpt-5.2-codex", _GPT_5_2),
    _gpt("gpt-5.3-codex", _GPT_5_2),
    _gpt("gpt-5.4", _GPT_5_4, FIELD_PRICING),
    _gpt("gpt-5.5", _GPT_5_5, FIELD_PRICING),
    # The field's other models: priced only (window and features not in the catalog).
    _priced("gpt-4o-mini", _GPT_4O_MINI),
    _priced("gpt-4o", _GPT_4O),
    _priced("claude-3-7-sonnet", _SONNET_3),
    _priced("claude-3-5-sonnet", _SONNET_3),
    _priced("claude-3-opus", _OPUS_3),
    _priced("claude-3-haiku", _HAIKU_3),
    _priced("gemini-3-pro", _GEMINI_3_PRO),
    _priced("gemini-2.5-pro", _GEMINI_2_5_PRO),
    _priced("gemini-2.5-flash", _GEMINI_2_5_FLASH),
    _priced("deepseek-chat", _DEEPSEEK_CHAT),
    _priced("deepseek-reasoner", _DEEPSEEK_REASONER),
    _priced("qwen3-coder-plus", _QWEN3_CODER_PLUS),
    _priced("glm-4.6", _GLM_4_5),
    _priced("glm-4.5", _GLM_4_5),
    _priced("glm-4.5-air", _GLM_4_5_AIR),
    _priced("kimi-k2", _KIMI_K2),
    _priced("kimi-k2.5", _KIMI_K2_5),
    # evo_magic's offline scripted stand-in: nothing is billed (override its price to price an
    # offline run as if it were a model).
    Family("offline", _row(0, 0, 0, 0, 0), OFFLINE_PRICING),
)

FAMILIES: dict[str, Family] = {entry.name: entry for entry in _ENTRIES}
"""Every family the catalog knows, by family id (see `model_family`)."""

_LONG_TAG = "[1m]"


def lookup(model: str) -> Family | None:
    """The catalog's entry for ``model`` (any id of its family), or None."""
    return FAMILIES.get(model_family(model))


def prices() -> dict[str, Price]:
    """Every priced family's `Price`, by family id (what `evo_magic.cost.DEFAULT_PRICES` holds)."""
    return {name: f.price for name, f in FAMILIES.items() if f.price is not None}


def context_window(model: str) -> int | None:
    """The context window of `model` in input tokens (dated, Bedrock and Vertex names
    included), or None when the model is not known. A Claude id tagged ``[1m]`` holds
    `LONG`; a GPT-5 id the catalog does not list holds the family's `GPT_5_WINDOW`."""
    family = model_family(model)
    if model.strip().lower().endswith(_LONG_TAG) and family.startswith("claude-"):
        return LONG
    entry = FAMILIES.get(family)
    if entry is not None and entry.window is not None:
        return entry.window
    if family == "gpt-5" or family.startswith(("gpt-5-", "gpt-5.")):
        return GPT_5_WINDOW
    return None


def supports(model: str, feature: str) -> bool | None:
    """True when `model` accepts `feature` (one of `FEATURES`), False when the catalog says it
    does not, None when the catalog does not know."""
    if feature not in FEATURES:
        raise ValueError(f"unknown context feature {feature!r}; known: {', '.join(FEATURES)}")
    info = model_info(model)
    return None if info is None else feature in info.features


def min_cacheable_tokens(model: str) -> int | None:
    """The minimum cacheable prompt length of ``model`` (any id of it), or None if unknown."""
    entry = lookup(model)
    return None if entry is None else entry.cache_minimum


@dataclass(frozen=True)
class ModelInfo:
    """One model's context window (input tokens) and the context features it accepts."""

    context_window: int
    features: frozenset[str]
    source: str = "documented"
    """"documented" (listed on the pages of `SOURCE`) or "assumed" (newer than every model
    they list)."""


def _info(entry: Family) -> ModelInfo | None:
    if entry.window is None or entry.features is None:
        return None
    assumed = entry.context_source is not None and entry.context_source.assumed
    return ModelInfo(entry.window, entry.features, "assumed" if assumed else "documented")


MODELS: dict[str, ModelInfo] = {
    name: info for name, entry in FAMILIES.items() if (info := _info(entry)) is not None
}
"""The window and features of every family whose features are known, by family id."""

MIN_CACHEABLE_TOKENS: dict[str, int] = {
    name: entry.cache_minimum for name, entry in FAMILIES.items() if entry.cache_minimum is not None
}
"""The minimum cacheable prompt length in tokens, by model family, on the Claude API."""


def model_info(model: str) -> ModelInfo | None:
    """What the catalog knows of `model`'s context (any id of its family), or None when it
    does not know its features."""
    return MODELS.get(model_family(model))
