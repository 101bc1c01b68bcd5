"""The adapter over the official `anthropic` SDK: sync client, streaming, usage captured.

Requests are marked for prompt caching as the request's `CacheSettings` say (see
`evo_magic.prompt_cache.place_breakpoints`); the usage the API reports, cache reads and writes
by TTL included, comes back in the reply. `import anthropic` costs about two seconds, so it
happens on the first call, not at import.
"""

from __future__ import annotations

import os
from typing import Any

from evo_magic.models.base import (
    ModelError,
    ModelReply,
    ModelRequest,
    TextCallback,
    system_note,
)
from evo_magic.prompt_cache import CacheSettings, place_breakpoints
from evo_magic.secrets import url_credentials, url_without_credentials
from evo_magic.usage import Usage

NO_CACHE = CacheSettings(enabled=False)

DEFAULT_MODEL = "claude-sonnet-5-5"


class AnthropicModel:
    """A Claude model reached through `anthropic.Anthropic`.

    The API key and base URL come from the SDK's usual sources (`ANTHROPIC_API_KEY`,
    `ANTHROPIC_BASE_URL`, ...) unless given, so any Anthropic-compatible server works.
    Transient errors (429, 5xx, 529, dropped connections) are retried by the SDK.
    """

    offline = False

    def __init__(
        self,
        name: str = DEFAULT_MODEL,
        *,
        client: Any = None,
        max_retries: int = 2,
        **client_options: Any,
    ):
        self.name = name
        self._client = client
        self._client_options = {"max_retries": max_retries, **client_options}

    @property
    def client(self) -> Any:
        if self._client is None:
            import anthropic  # deferred: expensive

            self._client = anthropic.Anthropic(**self._client_options)
        return self._client

    @property
    def base_url(self) -> str:
        """The endpoint requests go to (the client's, else the SDK's environment default)."""
        if self._client is not None:
            return str(getattr(self._client, "base_url", "")).rstrip("/")
        url = self._client_options.get("base_url") or os.environ.get("ANTHROPIC_BASE_URL")
        return str(url or "https://api.anthropic.com").rstrip("/")

    @property
    def _shown_url(self) -> str:
        """The endpoint as messages show it: without a password in it."""
        return url_without_credentials(self.base_url)

    def credentials(self) -> list[str]:
        """Every credential this model may send: passed in code, held by the client, or in
        the environment (so a redactor can keep them out of everything shown or stored)."""
        values = [self._client_options.get(k) for k in ("api_key", "auth_token")]
        if self._client is not None:
            values += [getattr(self._client, k, None) for k in ("api_key", "auth_token")]
        values += url_credentials(self.base_url)  # a proxy's password in the URL
        return [v for v in values if isinstance(v, str) and v]

    def respond(self, request: ModelRequest, on_text: TextCallback | None = None) -> ModelReply:
        import anthropic

        if self._client is None and not self.credentials() and not _environment_key():
            raise ModelError(MISSING_KEY.format(model=self.name))
        params: dict[str, Any] = {
            "model": self.name,
            "max_tokens": request.max_tokens,
            **request_params(request, self.name),
        }
        messages = self._messages_api(request, params)
        try:
            with messages.stream(**params) as stream:
                for event in stream:
                    if event.type == "text" and on_text is not None and event.text:
                        on_text(event.text)
                final = stream.get_final_message()
        except anthropic.APIStatusError as exc:
            raise ModelError(
                _status_message(exc), status=exc.status_code, error_type=_error_type(exc)
            ) from exc
        except (anthropic.APIConnectionError, *_transport_errors()) as exc:
            # A refused or dropped connection, a timeout; a stream cut mid-way surfaces as the
            # HTTP library's own error, which the SDK does not wrap (nor retry).
            raise ModelError(f"Could not reach {self._shown_url}: {_cause(exc)}") from exc
        except Exception as exc:
            # Anything else from the stream (garbage SSE data, tool JSON that does not parse) is
            # a malformed response: a ModelError like the others, not a raw traceback.
            raise ModelError(
                f"Malformed response from {self._shown_url}: {type(exc).__name__}: {exc}"
            ) from exc
        usage = final.usage.model_dump()
        managed = getattr(final, "context_management", None)
        diagnosis = getattr(getattr(final, "diagnostics", None), "cache_miss_reason", None)
        return ModelReply(
            content=[_block_param(block) for block in final.content],
            stop_reason=final.stop_reason,
            usage=Usage.from_api(usage),
            model=final.model or self.name,
            iterations=tuple(usage.get("iterations") or ()),
            applied_edits=tuple(
                edit.model_dump() for edit in (managed.applied_edits if managed else ())
            ),
            id=getattr(final, "id", None),
            cache_miss_reason=diagnosis.model_dump() if diagnosis is not None else None,
        )

    def _messages_api(self, request: ModelRequest, params: dict[str, Any]) -> Any:
        """The messages API `request` goes to, its server context-management parameters added
        to `params`: they live in the beta API (a beta header per feature)."""
        if not request.betas:
            return self.client.messages
        params["betas"] = list(request.betas)
        if request.context_management is not None:
            params["context_management"] = request.context_management
        if request.compaction is not None:
            params["compaction"] = request.compaction
        if request.diagnostics is not None:
            params["diagnostics"] = request.diagnostics
        return self.client.beta.messages

    def count_tokens(self, request: ModelRequest) -> tuple[int, int | None]:
        """The prompt's input tokens as `count_tokens` gives them (free: no model call), with
        the request's context edits applied, and the count before them when the API reports
        it (`context_management.original_input_tokens`, None otherwise)."""
        import anthropic

        params: dict[str, Any] = {"model": self.name, **request_params(request, self.name)}
        counter = self._messages_api(request, params)
        params.pop("compaction", None)  # counting takes the edits, not an on-demand summary
        params.pop("diagnostics", None)  # a count is no request to compare with
        try:
            counted = counter.count_tokens(**params)
        except anthropic.APIStatusError as exc:
            raise ModelError(
                _status_message(exc), status=exc.status_code, error_type=_error_type(exc)
            ) from exc
        except (anthropic.APIConnectionError, *_transport_errors()) as exc:
            raise ModelError(f"Could not reach {self.base_url}: {_cause(exc)}") from exc
        managed = getattr(counted, "context_management", None)
        original = managed.original_input_tokens if managed is not None else None
        return counted.input_tokens, original


MISSING_KEY = (
    "no Anthropic API key for {model}: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) in the "
    "kernel's environment, or pass api_key= to AnthropicModel; or run the offline stand-in "
    "(%%agent --offline, or Session(model='offline'))"
)


def _environment_key() -> bool:
    """True when the SDK would find a key or token in the environment."""
    return bool(os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN"))


def request_params(request: ModelRequest, model: str) -> dict[str, Any]:
    """``messages``, and ``system``, ``tools`` and ``tool_choice`` when given, with the
    request's cache breakpoints placed for ``model`` (none when ``request.cache`` is None or
    disabled). ``messages`` reads ``request.messages`` through (a `MarkedMessages`: the marked
    messages and the turn note swapped in, the list not copied), so it costs the same at any
    length; the SDK sends it as the list it reads as."""
    placed = place_breakpoints(
        request.messages,
        system=request.system,
        tools=request.tools,
        settings=request.cache or NO_CACHE,
        model=model,
        edited_from=request.edited_from,
        mark_newest=request.cache_newest,
        copy=False,  # the messages read through, the marked ones swapped in: no list copied
    )
    params = placed.params
    if request.turn_note:  # after the breakpoints: the cached prefix never holds it
        messages = params["messages"].followed_by(system_note(request.turn_note))
        params = {**params, "messages": messages}
    if request.tool_choice is not None:
        return {**params, "tool_choice": request.tool_choice}
    return params


def _cause(exc: BaseException) -> str:
    """The root cause of a connection error, in words ("Connection refused", "timed out")."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    text = str(exc).strip().rstrip(".") or type(exc).__name__
    return text.split("] ", 1)[-1] if text.startswith("[Errno") else text


def _transport_errors() -> tuple[type[BaseException], ...]:
    """The HTTP library's error base classes (the SDK uses httpx, or httpx2 in 2.x)."""
    errors: list[type[BaseException]] = []
    for module_name in ("httpx2", "httpx"):
        try:
            module = __import__(module_name)
        except ImportError:
            continue
        errors += [
            getattr(module, name) for name in ("HTTPError", "StreamError") if hasattr(module, name)
        ]
    return tuple(errors)


def _block_param(block: Any) -> dict[str, Any]:
    """An SDK content block as a request parameter dict (what we keep in the history)."""
    if block.type == "text":
        return {"type": "text", "text": block.text}
    if block.type == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    if block.type == "thinking":
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    if block.type == "redacted_thinking":
        return {"type": "redacted_thinking", "data": block.data}
    if block.type == "compaction":
        # Sent back byte for byte: a null summary stays null (a failed compaction).
        kept = {"type": "compaction", "content": block.content}
        sent = block.model_dump(mode="json", exclude_unset=True)  # only what the API sent
        for name in ("encrypted_content", "signature", "tool_changes"):
            if sent.get(name) is not None:
                kept[name] = sent[name]
        return kept
    return block.model_dump(exclude_none=True)


def _error_body(exc: Any) -> dict[str, Any]:
    """The `error` object of an Anthropic-shaped error response ({} when there is none)."""
    body = exc.body if isinstance(exc.body, dict) else {}
    return body["error"] if isinstance(body.get("error"), dict) else {}


def _error_type(exc: Any) -> str | None:
    return _error_body(exc).get("type")


def _status_message(exc: Any) -> str:
    error = _error_body(exc)
    detail = error.get("message") or str(exc)
    kind = error.get("type") or type(exc).__name__
    return f"API error {exc.status_code} ({kind}): {detail}"
