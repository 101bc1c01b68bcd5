"""SessionSettings: every setting of a session in one frozen, validated value.

Each setting is written once, as a field here or in `CompactPolicy` (the compactor's part):
its name, type, default, help text and rule. `Session(...)` takes them as keywords, a
session's setters replace this value (so the same rule refuses a bad one), the notebook's
`%config AgentMagics.<name>` traits are made from `setting_fields()`, and the settings table of
`docs/notebook.md` is `settings_markdown()`. Adding a setting is adding one field to
`SessionSettings`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import Field, dataclass, field, fields, replace
from typing import Any

from evo_magic.compact.policy import CompactPolicy
from evo_magic.cost import PriceTable, validate_prices
from evo_magic.declared import check_fields, is_declared, setting
from evo_magic.prompt_cache import TTL_SECONDS, CacheSettings
from evo_magic.tools.bash_settings import DEFAULT_ENV_DROP, BashSettings, GiB, MiB
from evo_magic.tools.sandbox import DEFAULT_SANDBOX, SANDBOX_MODES

DEFAULT_SYSTEM = """\
You are a careful coding agent working inside a researcher's notebook session.
Your workspace is a directory; file paths are relative to it. Use the tools to look before you \
change anything, keep tool outputs small (head, grep, offset/limit), and say what you found.
When the context grows long, or before switching to a new part of the task, call `compact` with \
a focus that names what must survive."""


RETIRED: dict[str, tuple[str, str]] = {
    "keep_recent": ("micro", "keep_recent"),
    "min_chars": ("micro", "min_chars"),
    "placeholder": ("micro", "placeholder"),
    "exclude_tools": ("micro", "exclude_tools"),
    "clear_at_least": ("micro", "clear_at_least"),
    "cache_aware": ("micro", "cache_aware"),
    "large_output_limit": ("large-outputs", "limit"),
    "preview_chars": ("large-outputs", "preview_chars"),
}
"""Settings of 0.1 that are now parameters of the default pipeline's strategies (setting ->
strategy, parameter): refused with a message saying how to set them now."""


def retired_message(name: str, value: Any = None) -> str:
    """What to say when the retired setting `name` is set (to `value`)."""
    strategy, parameter = RETIRED[name]
    shown = "..." if value is None else repr(value)
    pipeline = {"large-outputs": "large-outputs", "micro": "micro", "summarise": "summarise"}
    pipeline[strategy] = f"{strategy}({parameter}={shown})"
    specs = ", ".join(repr(spec) for spec in pipeline.values())
    return (
        f"{name} is no longer a setting: it is the {strategy} strategy's parameter {parameter}. "
        f"Set the strategies instead, e.g. %config AgentMagics.strategies = [{specs}] "
        "(in Python: Session(strategies=[...]))"
    )


def _prices(value: Any) -> Any:
    validate_prices(value or None)  # the price table's own rule (unknown rates, bad numbers)
    return value


@dataclass(frozen=True)
class SessionSettings:
    """What a session runs with; validated when made (ValueError naming the setting).

    `policy` is the compactor's (limits and the default pipeline's numbers); its fields are
    settings too, set by name through `with_changes`.
    """

    system_prompt: str = setting("", "System prompt. Empty: evo_magic's default.")
    max_turns: int = setting(30, "Model calls per %%agent cell (ask) at most.", minimum=1)
    max_tokens: int = setting(8_192, "max_tokens of each model call.", minimum=1)
    bash_timeout: float = setting(
        120.0,
        "Seconds before a bash command, and every process it started, is killed.",
        minimum=1.0,
    )
    sandbox: str = setting(
        DEFAULT_SANDBOX,
        "Where bash runs when bubblewrap cannot be used: 'require' refuses to run it, "
        "'warn' runs it unsandboxed and says so, 'off' never sandboxes.",
        choices=SANDBOX_MODES,
    )
    # What a bash command gets and its bounds: BashSettings' fields, checked by its rule.
    bash_env_keep: tuple[str, ...] = setting(
        (), "Name patterns of environment variables bash gets even when bash_env_drop matches."
    )
    bash_env_drop: tuple[str, ...] = setting(
        DEFAULT_ENV_DROP,
        "Name patterns (case-insensitive, * and ? wildcards) of environment variables bash "
        "does not get.",
    )
    sandbox_network: str = setting(
        "on", "'off': the sandbox has only loopback (pip, git clone and downloads stop working)."
    )
    sandbox_tmp_size: int | None = setting(
        512 * MiB,
        "Bytes each of the sandbox's /tmp, /var/tmp and /dev/shm may hold (None: no bound).",
    )
    bash_memory: int | None = setting(
        4 * GiB,
        "Bytes of memory a bash command may use: of address space per process, and in all its "
        "processes together where a memory cgroup can be made (None: no bound).",
    )
    bash_processes: int | None = setting(
        512, "Processes a bash command may have at once (None: no bound)."
    )
    bash_file_size: int | None = setting(
        4 * GiB, "Bytes of the largest file a bash command may write (None: no bound)."
    )
    caching: bool = setting(True, "Mark requests for prompt caching (cache_control breakpoints).")
    cache_ttl: str = setting(
        "5m", "Lifetime of the cache entries requests write.", choices=tuple(TTL_SECONDS)
    )
    cache_diagnosis: bool = setting(
        False,
        "Ask the API why each prompt missed the cache (beta cache-diagnosis-2026-04-07): "
        "recorded per call as cache_miss_reason.",
    )
    prices: PriceTable | Mapping[str, Any] = setting(
        {},
        "Price overrides, USD per million tokens: {model: {rate: number}}, rates among "
        "input, output, cache_write_5m, cache_write_1h, cache_read. Empty: the shipped table.",
        check=_prices,
    )
    policy: CompactPolicy = field(default_factory=CompactPolicy)
    cache_static_ttl: str | None = None
    """The tools and system breakpoints' TTL when it differs from `cache_ttl` (see
    `CacheSettings.static_ttl`)."""

    def __post_init__(self) -> None:
        check_fields(self)
        if not isinstance(self.policy, CompactPolicy):
            raise ValueError(f"policy must be a CompactPolicy, got {type(self.policy).__name__}")
        self.cache  # noqa: B018 - CacheSettings' own rule (TTL order)
        self.bash  # noqa: B018 - BashSettings' own rule (network mode, bounds)

    @property
    def system(self) -> str:
        """The system prompt sent: `system_prompt`, or evo_magic's default when empty."""
        return self.system_prompt or DEFAULT_SYSTEM

    @property
    def bash(self) -> BashSettings:
        """What a bash command gets and how far it may go."""
        return BashSettings(
            env_keep=self.bash_env_keep,
            env_drop=self.bash_env_drop,
            network=self.sandbox_network,  # type: ignore[arg-type]
            tmp_size=self.sandbox_tmp_size,
            memory=self.bash_memory,
            processes=self.bash_processes,
            file_size=self.bash_file_size,
        )

    @property
    def cache(self) -> CacheSettings:
        return CacheSettings(self.caching, self.cache_ttl, self.cache_static_ttl)

    def with_changes(self, **changes: Any) -> SessionSettings:
        """A copy with some settings changed, by name: this class's fields, `CompactPolicy`'s
        (e.g. `context_limit`), `cache=CacheSettings(...)` or `bash=BashSettings(...)`;
        `policy=None` or `cache=None` is the default. TypeError for an unknown name,
        ValueError for a bad value."""
        own = {f.name for f in fields(self)}
        policy = {f.name for f in fields(CompactPolicy)}
        retired = sorted(set(changes) & set(RETIRED))
        if retired:
            raise TypeError(retired_message(retired[0], changes[retired[0]]))
        unknown = sorted(set(changes) - own - policy - {"cache", "bash"})
        if unknown:
            raise TypeError(f"unknown setting(s) {unknown}; settings: {', '.join(names())}")
        mine = {k: v for k, v in changes.items() if k in own}
        if "policy" in mine and mine["policy"] is None:
            mine["policy"] = CompactPolicy()
        if "bash" in changes:
            mine.update(_bash_fields(changes["bash"]))
        if "cache" in changes:
            mine.update(_cache_fields(changes["cache"]))
        theirs = {k: v for k, v in changes.items() if k in policy}
        if theirs:
            mine["policy"] = replace(mine.get("policy", self.policy), **theirs)
        return replace(self, **mine) if mine else self


def _cache_fields(cache: CacheSettings | None) -> dict[str, Any]:
    cache = CacheSettings() if cache is None else cache
    if not isinstance(cache, CacheSettings):
        raise TypeError(f"cache must be a CacheSettings or None, got {type(cache).__name__}")
    return {"caching": cache.enabled, "cache_ttl": cache.ttl, "cache_static_ttl": cache.static_ttl}


def _bash_fields(bash: BashSettings) -> dict[str, Any]:
    if not isinstance(bash, BashSettings):
        raise TypeError(f"bash must be a BashSettings, got {type(bash).__name__}")
    return {
        "bash_env_keep": bash.env_keep,
        "bash_env_drop": bash.env_drop,
        "sandbox_network": bash.network,
        "sandbox_tmp_size": bash.tmp_size,
        "bash_memory": bash.memory,
        "bash_processes": bash.processes,
        "bash_file_size": bash.file_size,
    }


def setting_fields() -> list[tuple[str, Field[Any]]]:
    """Every setting as (owner, field), in the order `docs/notebook.md` lists them: the session's,
    then the compaction policy's."""
    own = [("SessionSettings", f) for f in fields(SessionSettings) if is_declared(f)]
    return own + [("CompactPolicy", f) for f in fields(CompactPolicy) if is_declared(f)]


def names() -> list[str]:
    return [f.name for _, f in setting_fields()]
