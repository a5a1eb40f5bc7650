"""cargohold's gateway: cargohold between any LLM client and its provider, with no code change.

An HTTP server (``cargohold gateway``, loopback by default) that speaks the Anthropic Messages
API and OpenAI's Chat Completions and Responses APIs. Before each request is forwarded to the
upstream, the heavy tool results and tool-call inputs of its history are stored and replaced by
their stubs (the hold's offloader: scope, thresholds, secrets policy), compaction runs if
configured, and the edge guard refuses, in the provider's own error shape, a leak the gateway
cannot fix. Everything else (headers, API keys, beta flags, unknown fields, other endpoints)
passes through untouched, and responses stream back as they arrive. See ``docs/gateway.md``.

Needs Starlette, uvicorn and httpx: ``pip install 'cargohold[gateway]'``. Importing this package
without them raises :class:`cargohold.ConfigError` naming the extra.

Example::

    import cargohold, uvicorn
    from cargohold.gateway import GatewayConfig, build_app

    hold = cargohold.open(session="claude-code")
    app = build_app(hold, GatewayConfig(upstream="https://api.anthropic.com"))
    uvicorn.run(app, host="127.0.0.1", port=8787)
"""

try:
    import httpx as _httpx  # noqa: F401 - the extra's presence, checked once here
    import starlette as _starlette  # noqa: F401
    import uvicorn as _uvicorn  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without the extra
    if getattr(exc, "name", None) not in ("httpx", "starlette", "uvicorn"):
        raise
    from cargohold._errors import ConfigError

    raise ConfigError(
        "cargohold.gateway needs Starlette, uvicorn and httpx: pip install 'cargohold[gateway]'"
    ) from exc

from cargohold.gateway._app import SESSION_HEADER, GatewayConfig, ResponseCut, build_app
from cargohold.gateway._rewrite import RewriteCounts, Rewriter, RewriteTotals

__all__ = [
    "SESSION_HEADER",
    "GatewayConfig",
    "ResponseCut",
    "RewriteCounts",
    "RewriteTotals",
    "Rewriter",
    "build_app",
]
