"""Configuration: one file, ``CARGOHOLD_*`` variables, explicit arguments; resolved once.

Precedence, highest first: explicit arguments > environment > file > defaults.

The file is ``cargohold.toml`` (top-level keys) or the ``[tool.cargohold]`` table of
``pyproject.toml``, whichever is found first walking up from the working directory; or the file
named by ``CARGOHOLD_CONFIG``. Keys (and their variables)::

    store = "memory://" | "/a/path" | "file:///a/path" | "postgresql://..."   CARGOHOLD_STORE
    blobs = "s3://bucket/prefix"   (PostgreSQL store: bodies in object storage)  CARGOHOLD_BLOBS
    blobs_threshold = 65536   (bodies larger than this go to the bucket)
                                                              CARGOHOLD_BLOBS_THRESHOLD
    tenant = "acme"                                                           CARGOHOLD_TENANT
    user = "ana"                                                              CARGOHOLD_USER
    session = "run-1"                                                         CARGOHOLD_SESSION
    max_artifact_bytes = 16777216                                 CARGOHOLD_MAX_ARTIFACT_BYTES
    session_bytes, session_objects, store_bytes, store_objects   CARGOHOLD_SESSION_BYTES ...
    tenant_bytes, tenant_objects   (unset: no tenant quota)         CARGOHOLD_TENANT_BYTES ...
    default_ttl = 86400    max_ttl = 604800   (seconds)          CARGOHOLD_DEFAULT_TTL ...
    sliding_ttl = false    (true: each resolved read extends the life)  CARGOHOLD_SLIDING_TTL
    heavy_threshold = 32768   (at most 1048576, the largest read)   CARGOHOLD_HEAVY_THRESHOLD
    tool_thresholds = { fetch = 65536 }   (per tool, each at most 1048576)
                                                              CARGOHOLD_TOOL_THRESHOLDS
    tool_classifications = { read_policy = "exact_required" }   (declared per tool)
                                                         CARGOHOLD_TOOL_CLASSIFICATIONS
    secrets_policy = { fetch_logs = "mask" }   (per tool, "*" for the rest: redact|reject|mask)
                                                              CARGOHOLD_SECRETS_POLICY
    attachment_disposition = "ref"   (ref | inline | provider_native | tool:<name>)
                                                        CARGOHOLD_ATTACHMENT_DISPOSITION
    tool_dispositions = { screenshot = "inline" }   (per tool, over the default)
                                                             CARGOHOLD_TOOL_DISPOSITIONS
    ref_arguments = ["update_page"]   (MCP proxy: tools that accept artifact:// arguments)
                                                                 CARGOHOLD_REF_ARGUMENTS
    upstream_timeout = 60   (MCP proxy: seconds an upstream request may take)
                                                              CARGOHOLD_UPSTREAM_TIMEOUT
    compaction_trigger_tokens = 100000   compaction_keep_last = 3
    compaction_clear_at_least = 20000    compaction_min_result_bytes = 1024
    compaction_exclude_tools = ["memory"]   compaction_clear_tool_inputs = false
                                                  CARGOHOLD_COMPACTION_TRIGGER_TOKENS ...
    gateway_upstream = "https://api.anthropic.com"   gateway_port = 8787   gateway_compact = false
    gateway_read_tools = false     (cargohold gateway)  CARGOHOLD_GATEWAY_UPSTREAM ...
"""

from __future__ import annotations

import dataclasses
import getpass
import math
import os
import stat
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cargohold._errors import CargoholdError, ConfigError, InvalidScopeError
from cargohold._records import Limits
from cargohold._scope import Scope, check_part

if TYPE_CHECKING:  # the store is imported when a store is opened, not with the configuration
    from cargohold.store import Clock, StoreBackend

ENV_PREFIX = "CARGOHOLD_"
DEFAULT_TENANT = "local"
DEFAULT_SESSION = "default"
"""The CLI's documented session (one person's shell is one scope); the library has none."""
NO_SESSION = (
    "no session: give one as cargohold.open(session=...), CARGOHOLD_SESSION or session = "
    '"..." in cargohold.toml (a session names one run, thread or conversation; unrelated runs '
    "must not share one)"
)
"""What a library caller is told when no argument, variable or file names the session."""
EVENTS_IN_STORE = "store"
"""The ``events_log`` value that sends the command line's decision events to the PostgreSQL
store's ``events`` table instead of a JSON-lines file (a file of that name is ``./store``)."""
MAX_READ_BUDGET = 1024 * 1024
"""The largest read budget a configuration may set (1 MiB, as every read answer)."""
MAX_THRESHOLD = MAX_READ_BUDGET
"""The highest heavy threshold, global or per tool (1 MiB, the largest read). There is no switch
that turns offloading off: a threshold above every read's bound would be one (``1e15`` let the
guard pass 5 MiB raw), so a higher one is a configuration error."""


_DEFAULTS = Limits()
_BUDGETS = ("light", "balanced", "strong", "max")


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError("must be a string")
    return value


def _integer(value: object) -> int:
    # A number from a file, or its text from an environment variable; never a bool (TOML's
    # `true` is not a byte count) and never a fractional number.
    if isinstance(value, bool):
        raise ValueError("must be an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise ValueError("must be an integer")


def _number(value: object) -> float:
    if isinstance(value, bool):
        raise ValueError("must be a number")
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            raise ValueError("must be a number") from None
    else:
        raise ValueError("must be a number")
    if not math.isfinite(number):
        raise ValueError("must be a finite number")
    return number


def _positive(convert: Callable[[object], Any], *, most: int | None = None) -> Callable[..., Any]:
    def check(value: object) -> Any:
        number = convert(value)
        if number <= 0:
            raise ValueError("must be greater than 0")
        if most is not None and number > most:
            raise ValueError(f"must be at most {most}")
        return number

    return check


def _not_negative(value: object) -> int:
    number = _integer(value)
    if number < 0:
        raise ValueError("must be 0 or more")
    return number


def _boolean(value: object) -> bool:
    # TOML's true/false, or an environment variable's text; never a number from a file.
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("true", "1"):
            return True
        if text in ("false", "0"):
            return False
    raise ValueError("must be true or false (1 or 0 in the environment)")


def _blobs(value: object) -> str:
    """An ``s3://bucket/prefix`` URL, canonical; checked without importing the S3 client."""
    from cargohold.store._location import parse_location

    try:
        return parse_location(_text(value))
    except CargoholdError as exc:
        raise ValueError(str(exc)) from None


def _budget(value: object) -> str:
    if value not in _BUDGETS:
        raise ValueError(f"must be one of {', '.join(_BUDGETS)}")
    return str(value)


class _EntryError(ValueError):
    """A problem with one entry of a mapping key, reported as ``key.entry: problem``."""

    def __init__(self, entry: str, problem: str) -> None:
        super().__init__(problem)
        self.entry = entry


def _sizes(value: object, *, check: Callable[[object], int] | None = None) -> dict[str, int]:
    """A mapping of names to positive integers (``model_windows``; ``tool_thresholds`` with
    :func:`_threshold` as ``check``)."""
    if not isinstance(value, Mapping):
        raise ValueError("must be a table of name = positive integer")
    checked: dict[str, int] = {}
    for name, size in value.items():
        if not isinstance(name, str):
            raise ValueError("must be a table of name = positive integer")
        try:
            checked[name] = (check or _positive(_integer))(size)
        except ValueError as exc:
            raise _EntryError(name, str(exc)) from None
    return checked


def _threshold(value: object) -> int:
    """A heavy threshold: a positive integer of at most :data:`MAX_THRESHOLD` bytes."""
    number: int = _positive(_integer)(value)
    if number > MAX_THRESHOLD:
        raise ValueError(
            f"must be at most {MAX_THRESHOLD} bytes (1 MiB, the largest read); there is no "
            "threshold that turns offloading off"
        )
    return number


def _thresholds(value: object) -> dict[str, int]:
    """A mapping of tool names to heavy thresholds (``tool_thresholds``)."""
    return _sizes(value, check=_threshold)


def check_threshold(setting: str, value: object) -> int:
    """A heavy threshold given as an argument, checked as the configuration checks it.

    Args:
        setting: The setting's name for the message (``heavy_threshold``,
            ``tool_thresholds.fetch``).
        value: The threshold in bytes.

    Raises:
        ConfigError: not a positive integer, or over :data:`MAX_THRESHOLD` (the message names
            ``setting`` and the bound).
    """
    if isinstance(value, float):  # an integer only: 1e15 from code is a mistake, not a size
        raise ConfigError(f"invalid configuration: {setting}: must be an integer")
    try:
        return _threshold(value)
    except ValueError as exc:
        raise ConfigError(f"invalid configuration: {setting}: {exc}") from None


SECRETS_POLICIES = ("redact", "reject", "mask")
"""What a tool's results holding a credential become: redacted (the default), refused, masked."""


def _policies(value: object) -> dict[str, str]:
    """A mapping of tool names to a secrets policy (``secrets_policy``)."""
    if not isinstance(value, Mapping):
        raise ValueError('must be a table of tool = "redact", "reject" or "mask"')
    checked: dict[str, str] = {}
    for name, policy in value.items():
        if not isinstance(name, str):
            raise ValueError('must be a table of tool = "redact", "reject" or "mask"')
        if policy not in SECRETS_POLICIES:
            raise _EntryError(name, f"must be one of {', '.join(SECRETS_POLICIES)}")
        checked[name] = policy
    return checked


def _classifications(value: object) -> dict[str, str]:
    """A mapping of tool names to a declared class (``tool_classifications``): only
    ``exact_required`` can be declared (a declaration makes a result stricter, never looser)."""
    if not isinstance(value, Mapping):
        raise ValueError('must be a table of tool = "exact_required"')
    checked: dict[str, str] = {}
    for name, declared in value.items():
        if not isinstance(name, str):
            raise ValueError('must be a table of tool = "exact_required"')
        if declared != "exact_required":
            raise _EntryError(name, 'must be "exact_required" (the only class a tool declares)')
        checked[name] = declared
    return checked


DISPOSITIONS = ("ref", "inline", "provider_native")
"""The attachment dispositions besides ``tool:<name>`` (see :mod:`cargohold.guard`)."""


def _disposition(value: object) -> str:
    # Checked here by shape only: cargohold.guard (which owns the Disposition type) is not
    # imported at configuration time; Disposition.parse re-checks the tool name where it is used.
    if isinstance(value, str):
        text = value.strip()
        if text in DISPOSITIONS or (text.startswith("tool:") and len(text) > 5):
            return text
    raise ValueError("must be ref, inline, provider_native or tool:<name>")


def _dispositions(value: object) -> dict[str, str]:
    """A mapping of tool names to a disposition (``tool_dispositions``)."""
    if not isinstance(value, Mapping):
        raise ValueError("must be a table of tool = disposition")
    checked: dict[str, str] = {}
    for name, disposition in value.items():
        if not isinstance(name, str):
            raise ValueError("must be a table of tool = disposition")
        try:
            checked[name] = _disposition(disposition)
        except ValueError as exc:
            raise _EntryError(name, str(exc)) from None
    return checked


def _names(value: object) -> tuple[str, ...]:
    """A list of tool names (``ref_arguments``); from the environment, comma-separated."""
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, list | tuple) or not all(
        isinstance(name, str) and name for name in value
    ):
        raise ValueError("must be a list of tool names")
    return tuple(value)


_Check = Callable[[object], Any]
_SCHEMA: dict[str, tuple[_Check, Any]] = {
    "store": (_text, None),
    "blobs": (_blobs, None),
    "blobs_threshold": (_not_negative, 64 * 1024),
    "tenant": (_text, None),
    "user": (_text, None),
    "session": (_text, None),
    "max_artifact_bytes": (_positive(_integer), _DEFAULTS.max_artifact_bytes),
    "session_bytes": (_positive(_integer), _DEFAULTS.session_bytes),
    "session_objects": (_positive(_integer), _DEFAULTS.session_objects),
    "store_bytes": (_positive(_integer), _DEFAULTS.store_bytes),
    "store_objects": (_positive(_integer), _DEFAULTS.store_objects),
    "tenant_bytes": (_positive(_integer), None),
    "tenant_objects": (_positive(_integer), None),
    "default_ttl": (_positive(_number), _DEFAULTS.default_ttl),
    "max_ttl": (_positive(_number), _DEFAULTS.max_ttl),
    "sliding_ttl": (_boolean, False),
    "heavy_threshold": (_threshold, 32 * 1024),
    "tool_thresholds": (_thresholds, {}),
    "tool_classifications": (_classifications, {}),
    "budget": (_budget, "balanced"),
    "read_budget": (_positive(_integer, most=MAX_READ_BUDGET), 16 * 1024),
    "events_log": (_text, None),
    "window_margin": (_not_negative, 4096),
    "model_windows": (_sizes, {}),
    "secrets_policy": (_policies, {}),
    "attachment_disposition": (_disposition, "ref"),
    "tool_dispositions": (_dispositions, {}),
    "ref_arguments": (_names, ()),
    "upstream_timeout": (_positive(_number), 60.0),
    # Hold.compact's default CompactionPolicy (cargohold.compact: the defaults are its own)
    "compaction_trigger_tokens": (_positive(_integer), 100_000),
    "compaction_keep_last": (_not_negative, 3),
    "compaction_clear_at_least": (_not_negative, 20_000),
    "compaction_exclude_tools": (_names, ()),
    "compaction_clear_tool_inputs": (_boolean, False),
    "compaction_min_result_bytes": (_not_negative, 1024),
    # cargohold gateway (docs/gateway.md): its upstream base URL (None: the provider's own)
    "gateway_upstream": (_text, None),
    "gateway_port": (_positive(_integer, most=65535), 8787),
    "gateway_compact": (_boolean, False),
    "gateway_read_tools": (_boolean, False),
}
"""Every configuration key: its check (which also converts environment text) and its default.

Checked by hand rather than by a pydantic model: importing pydantic cost every CLI command that
opens the store ~60 ms of its ~200 ms start-up, for two dozen flat keys.
"""
_KEYS = tuple(_SCHEMA)


def _validate(values: Mapping[str, Any]) -> dict[str, Any]:
    """Every key checked and converted, defaults filled in; all problems in one ConfigError."""
    problems = [f"{key}: unknown key" for key in values if key not in _SCHEMA]
    checked: dict[str, Any] = {}
    for key, (check, default) in _SCHEMA.items():
        if key not in values:
            checked[key] = default
            continue
        try:
            checked[key] = check(values[key])
        except _EntryError as exc:
            problems.append(f"{key}.{exc.entry}: {exc}")
        except ValueError as exc:
            problems.append(f"{key}: {exc}")
    if problems:
        raise ConfigError(f"invalid configuration: {'; '.join(problems)}")
    return checked


@dataclass(frozen=True, slots=True)
class Settings:
    """The resolved configuration.

    Attributes:
        store: The store URL; ``None`` is the embedded default (local, XDG cache).
        blobs: ``s3://bucket/prefix`` where the PostgreSQL store keeps bodies larger than
            ``blobs_threshold`` (endpoint and credentials from the AWS variables); ``None``:
            bodies stay in PostgreSQL.
        blobs_threshold: Bodies of more than this many bytes go to the bucket (64 KiB).
        tenant: Tenant for surfaces that need a scope (the CLI); defaults to ``local``.
        user: User for such surfaces; defaults to the OS user name.
        session: The session from an argument, ``CARGOHOLD_SESSION`` or the file; ``None``
            when none names one (:meth:`scope` then refuses: only the CLI, which passes
            ``default_session``, has a default).
        limits: Store limits.
        sliding_ttl: Whether each resolved read through a :class:`~cargohold.Hold` extends the
            artifact's life by the TTL again (off by default: bytes live their TTL from the
            last write, however often they are read).
        heavy_threshold: Results of at least this many bytes are offloaded (32 KiB; at most
            :data:`MAX_THRESHOLD`, 1 MiB).
        tool_thresholds: Per-tool heavy thresholds (each at most 1 MiB too).
        tool_classifications: Tools whose results are declared ``exact_required`` (security
            evidence, policy or authority payloads, memory or context responses): their stubs
            show verbatim excerpts only and no compressor sees them.
        budget: The default stub budget (``light``, ``balanced``, ``strong``, ``max``).
        read_budget: The default byte budget of a model-facing read (16 KiB, at most 1 MiB).
        events_log: A JSON-lines file the CLI appends decision events to; ``None`` for the
            default under the user's state directory; ``"store"`` (:data:`EVENTS_IN_STORE`)
            for the events table of the store, which must then be PostgreSQL (every CLI
            surface writes there, ``cargohold events`` and ``cargohold report`` read there).
        window_margin: Tokens the edge guard keeps free below a model's context window.
        model_windows: Context windows by model name prefix, over the guard's built-in table.
        secrets_policy: Per-tool handling of results that hold a credential (``"*"``: every
            tool not named): ``redact`` (the default), ``reject`` or ``mask`` (docs/secrets.md).
        attachment_disposition: How images, audio and blobs in tool results reach the model
            by default: ``ref`` (stored, a stub in their place), ``inline``,
            ``provider_native`` or ``tool:<name>``.
        tool_dispositions: Per-tool dispositions, over ``attachment_disposition``.
        ref_arguments: Tools (of an MCP proxy's upstream) whose ``artifact://`` arguments are
            resolved to the artifact's exact content for that call.
        upstream_timeout: Seconds an MCP proxy waits for its upstream server's answer.
        compaction_trigger_tokens: :meth:`~cargohold.Hold.compact`'s default trigger (see
            :class:`cargohold.CompactionPolicy`, whose fields the other ``compaction_*``
            settings are too).
        gateway_upstream: ``cargohold gateway``'s upstream base URL (``None``: each
            provider's own API).
        gateway_port: The port ``cargohold gateway`` listens on (loopback).
        gateway_compact: Whether ``cargohold gateway`` compacts each request.
        gateway_read_tools: Whether ``cargohold gateway`` adds the read tools to a request
            that holds a reference and runs them itself (for clients that cannot add tools).
        source: Which file was read, if any (for ``--help``-style diagnostics only).
    """

    # Never in the repr: a store URL may hold a password, the scope parts are owner identity.
    store: str | None = dataclasses.field(repr=False)
    tenant: str = dataclasses.field(repr=False)
    user: str = dataclasses.field(repr=False)
    session: str | None = dataclasses.field(repr=False)
    limits: Limits
    sliding_ttl: bool = False
    heavy_threshold: int = 32 * 1024
    tool_thresholds: Mapping[str, int] = dataclasses.field(default_factory=dict)
    tool_classifications: Mapping[str, str] = dataclasses.field(default_factory=dict)
    budget: str = "balanced"
    read_budget: int = 16 * 1024
    events_log: str | None = None
    window_margin: int = 4096
    model_windows: Mapping[str, int] = dataclasses.field(default_factory=dict)
    secrets_policy: Mapping[str, str] = dataclasses.field(default_factory=dict)
    attachment_disposition: str = "ref"
    tool_dispositions: Mapping[str, str] = dataclasses.field(default_factory=dict)
    ref_arguments: tuple[str, ...] = ()
    upstream_timeout: float = 60.0
    compaction_trigger_tokens: int = 100_000
    compaction_keep_last: int = 3
    compaction_clear_at_least: int = 20_000
    compaction_exclude_tools: tuple[str, ...] = ()
    compaction_clear_tool_inputs: bool = False
    compaction_min_result_bytes: int = 1024
    gateway_upstream: str | None = None
    gateway_port: int = 8787
    gateway_compact: bool = False
    gateway_read_tools: bool = False
    blobs: str | None = dataclasses.field(default=None, repr=False)
    blobs_threshold: int = 64 * 1024
    source: Path | None = None

    def open_store(self) -> StoreBackend:
        """Open the store these settings name (``store``, with its ``limits`` and ``blobs``
        tier); ``""`` is the embedded default. The caller closes it."""
        from cargohold.store import open_store as open_url

        return open_url(
            self.store or "",
            limits=self.limits,
            blobs=self.blobs,
            blobs_threshold=self.blobs_threshold,
        )

    def scope(self, **attribution: str | None) -> Scope:
        """The scope these settings name, with optional task/worker/agent attribution.

        Raises:
            InvalidScopeError: no session was given (an argument, ``CARGOHOLD_SESSION`` or the
                file): a missing identity component is an error, never a shared default.
        """
        if self.session is None:
            raise InvalidScopeError(NO_SESSION)
        return Scope(self.tenant, self.user, self.session, **attribution)


def _find_file(start: Path) -> tuple[Path, dict[str, Any]] | None:
    for folder in (start, *start.parents):
        candidate = folder / "cargohold.toml"
        if candidate.is_file():
            return candidate, _read_toml(candidate)
        project = folder / "pyproject.toml"
        if project.is_file():
            table = _read_toml(project).get("tool", {}).get("cargohold")
            if isinstance(table, dict):
                return project, table
    return None


MAX_CONFIG_BYTES = 1024 * 1024
"""The largest configuration file read (1 MiB; a real one is a few hundred bytes)."""


def _read_toml(path: Path) -> dict[str, Any]:
    """The TOML table of a configuration file, read within bounds.

    Only a regular file is read (``/dev/zero``, a FIFO or a terminal named by ``--config`` or
    ``CARGOHOLD_CONFIG`` would be read forever, or block), and at most
    :data:`MAX_CONFIG_BYTES` of it; a table nested too deeply for the parser is refused like
    any other bad file.

    Raises:
        ConfigError: a file that cannot be opened, is not a regular file, is too large, is not
            UTF-8 or not TOML; the message names the file (a person typed it), never its text.
    """
    import tomllib  # only when there is a file to read: most runs of the CLI find none

    name = path.name
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer before the check below.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ConfigError(f"cannot read configuration file {name}") from exc
    with os.fdopen(fd, "rb") as handle:
        try:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise ConfigError(f"cannot read configuration file {name}: not a regular file")
            raw = handle.read(MAX_CONFIG_BYTES + 1)
        except OSError as exc:
            raise ConfigError(f"cannot read configuration file {name}") from exc
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"cannot read configuration file {name}: over {MAX_CONFIG_BYTES} bytes")
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"cannot read configuration file {name}: not UTF-8") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"cannot read configuration file {name}: not valid TOML") from exc
    except RecursionError:  # the parser recurses once per nested array or inline table
        raise ConfigError(f"cannot read configuration file {name}: nested too deeply") from None


def _from_env(environ: Mapping[str, str]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key in _KEYS:
        value = environ.get(ENV_PREFIX + key.upper())
        if value is not None and value != "":
            found[key] = _pairs(key, value) if key in _MAPPINGS else value
    return found


_MAPPINGS = frozenset(
    {
        "tool_thresholds",
        "tool_classifications",
        "model_windows",
        "secrets_policy",
        "tool_dispositions",
    }
)


def _pairs(key: str, value: str) -> dict[str, str]:
    """``CARGOHOLD_TOOL_THRESHOLDS=fetch=65536,grep=8192`` as a mapping (validated later)."""
    pairs: dict[str, str] = {}
    for item in value.split(","):
        name, sep, size = item.partition("=")
        if not sep or not name.strip():
            shape = {
                "secrets_policy": "tool=redact|reject|mask",
                "tool_dispositions": "tool=disposition",
                "tool_classifications": "tool=exact_required",
            }.get(key, "name=number")
            raise ConfigError(f"{ENV_PREFIX}{key.upper()} is a list of {shape}, comma-separated")
        pairs[name.strip()] = size.strip()
    return pairs


def _default_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers): still a usable, stable name
        return f"uid-{os.getuid()}"


def open_store(
    url: str | os.PathLike[str] | None = None,
    *,
    limits: Limits | None = None,
    clock: Clock = time.time,
    blobs: str | None = None,
    blobs_threshold: int | None = None,
) -> StoreBackend:
    """Open a store: the one ``url`` names, or with ``url=None`` the configured one.

    The configured store is ``CARGOHOLD_STORE``, then ``store`` in ``cargohold.toml`` or
    ``[tool.cargohold]``, else the embedded default (local, under the XDG cache directory), as
    the CLI resolves it; with it, the configured ``limits`` and ``blobs`` tier when omitted.
    The URL forms are :func:`cargohold.store.open_store`'s. The caller closes the store.

    Args:
        url: A store URL or path; ``""`` is the embedded default; ``None`` the configured store.
        limits: Store limits (the configured ones with ``url=None``, else the defaults).
        clock: Source of "now" for TTLs.
        blobs: ``s3://bucket/prefix`` for the PostgreSQL store's bodies (configured with
            ``url=None``).
        blobs_threshold: Bodies of more than this many bytes go to the bucket (64 KiB).

    Raises:
        ConfigError: a bad configuration, an unknown scheme, a missing extra, or ``blobs`` for
            another backend than PostgreSQL.
    """
    from cargohold.store import open_store as open_url

    if url is None:
        settings = load_settings()
        url = settings.store or ""
        limits = settings.limits if limits is None else limits
        blobs = settings.blobs if blobs is None else blobs
        if blobs_threshold is None:
            blobs_threshold = settings.blobs_threshold
    return open_url(url, limits=limits, clock=clock, blobs=blobs, blobs_threshold=blobs_threshold)


def load_settings(
    overrides: Mapping[str, Any] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    config_file: str | os.PathLike[str] | None = None,
    default_session: str | None = None,
) -> Settings:
    """Resolve settings once: explicit ``overrides`` > environment > file > defaults.

    Args:
        overrides: Explicit values (``None`` values are ignored).
        environ: The environment to read (``os.environ`` when omitted).
        cwd: Where to start looking for a configuration file.
        config_file: A file to read instead of searching (also ``CARGOHOLD_CONFIG``).
        default_session: The session when none is given; ``None`` (the library's rule)
            leaves ``session`` unset, so :meth:`Settings.scope` and :func:`cargohold.open`
            refuse. The CLI passes :data:`DEFAULT_SESSION`, its documented default.

    Raises:
        ConfigError: an unreadable file, an unknown key, or a value of the wrong type.
    """
    env = os.environ if environ is None else environ
    source: Path | None = None
    file_values: dict[str, Any] = {}
    named = config_file or env.get(ENV_PREFIX + "CONFIG")
    if named:
        source = Path(named)
        data = _read_toml(source)
        file_values = (
            data.get("tool", {}).get("cargohold", data)
            if source.name == ("pyproject.toml")
            else data
        )
    else:
        found = _find_file(Path(cwd) if cwd is not None else Path.cwd())
        if found is not None:
            source, file_values = found
    if not isinstance(file_values, dict):
        raise ConfigError("invalid configuration: [tool.cargohold] must be a table")
    merged: dict[str, Any] = {**file_values, **_from_env(env)}
    merged.update({k: v for k, v in (overrides or {}).items() if v is not None})
    model = _validate(merged)
    try:
        limits = Limits(
            max_artifact_bytes=model["max_artifact_bytes"],
            session_bytes=model["session_bytes"],
            session_objects=model["session_objects"],
            store_bytes=model["store_bytes"],
            store_objects=model["store_objects"],
            default_ttl=model["default_ttl"],
            max_ttl=model["max_ttl"],
            tenant_bytes=model["tenant_bytes"],
            tenant_objects=model["tenant_objects"],
        )
    except CargoholdError as exc:
        raise ConfigError(f"invalid configuration: {exc}") from None
    for part in ("tenant", "user", "session"):
        value = model[part]
        if value is not None:
            try:
                check_part(part, value, required=True)
            except CargoholdError as exc:
                raise ConfigError(f"invalid configuration: {part}: {exc}") from None
    return Settings(
        store=model["store"] or None,
        tenant=model["tenant"] or DEFAULT_TENANT,
        user=model["user"] or _default_user(),
        session=model["session"] or default_session,
        limits=limits,
        sliding_ttl=model["sliding_ttl"],
        heavy_threshold=model["heavy_threshold"],
        tool_thresholds=dict(model["tool_thresholds"]),
        tool_classifications=dict(model["tool_classifications"]),
        budget=model["budget"],
        read_budget=model["read_budget"],
        events_log=model["events_log"] or None,
        window_margin=model["window_margin"],
        model_windows=dict(model["model_windows"]),
        secrets_policy=dict(model["secrets_policy"]),
        attachment_disposition=model["attachment_disposition"],
        tool_dispositions=dict(model["tool_dispositions"]),
        ref_arguments=model["ref_arguments"],
        upstream_timeout=model["upstream_timeout"],
        compaction_trigger_tokens=model["compaction_trigger_tokens"],
        compaction_keep_last=model["compaction_keep_last"],
        compaction_clear_at_least=model["compaction_clear_at_least"],
        compaction_exclude_tools=model["compaction_exclude_tools"],
        compaction_clear_tool_inputs=model["compaction_clear_tool_inputs"],
        compaction_min_result_bytes=model["compaction_min_result_bytes"],
        gateway_upstream=model["gateway_upstream"] or None,
        gateway_port=model["gateway_port"],
        gateway_compact=model["gateway_compact"],
        gateway_read_tools=model["gateway_read_tools"],
        blobs=model["blobs"],
        blobs_threshold=model["blobs_threshold"],
        source=source,
    )
