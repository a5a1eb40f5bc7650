"""Configuration: one file, ``CARGOHOLD_*`` variables, explicit arguments; resolved once.

Precedence, highest first: explicit arguments > environment > file > defaults.

The file is ``cargohold.toml`` (top-level keys) or the ``[tool.cargohold]`` table of
``pyproject.toml``, whichever is found first walking up from the working directory; or the file
named by ``CARGOHOLD_CONFIG``. Keys (and their variables)::

    store = "memory://" | "/a/path" | "file:///a/path" | "postgresql://..."   CARGOHOLD_STORE
    tenant = "acme"                                                           CARGOHOLD_TENANT
    user = "ana"                                                              CARGOHOLD_USER
    session = "run-1"                                                         CARGOHOLD_SESSION
    max_artifact_bytes = 16777216                                 CARGOHOLD_MAX_ARTIFACT_BYTES
    session_bytes, session_objects, store_bytes, store_objects   CARGOHOLD_SESSION_BYTES ...
    default_ttl = 86400    max_ttl = 604800   (seconds)          CARGOHOLD_DEFAULT_TTL ...
"""

from __future__ import annotations

import dataclasses
import functools
import getpass
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cargohold._errors import CargoholdError, ConfigError
from cargohold._records import Limits
from cargohold._scope import Scope, check_part

if TYPE_CHECKING:
    from pydantic import BaseModel

ENV_PREFIX = "CARGOHOLD_"
DEFAULT_TENANT = "local"
DEFAULT_SESSION = "default"


_DEFAULTS = Limits()
_KEYS = (
    "store",
    "tenant",
    "user",
    "session",
    "max_artifact_bytes",
    "session_bytes",
    "session_objects",
    "store_bytes",
    "store_objects",
    "default_ttl",
    "max_ttl",
    "heavy_threshold",
    "tool_thresholds",
    "budget",
    "read_budget",
    "events_log",
    "window_margin",
    "model_windows",
)


@functools.cache
def _model() -> type[BaseModel]:
    """The validating model, built on first use: pydantic costs a CLI start-up ~150 ms."""
    from typing import Literal

    from pydantic import BaseModel, ConfigDict, Field

    class Model(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)

        store: str | None = None
        tenant: str | None = None
        user: str | None = None
        session: str | None = None
        max_artifact_bytes: int = Field(default=_DEFAULTS.max_artifact_bytes, gt=0)
        session_bytes: int = Field(default=_DEFAULTS.session_bytes, gt=0)
        session_objects: int = Field(default=_DEFAULTS.session_objects, gt=0)
        store_bytes: int = Field(default=_DEFAULTS.store_bytes, gt=0)
        store_objects: int = Field(default=_DEFAULTS.store_objects, gt=0)
        default_ttl: float = Field(default=_DEFAULTS.default_ttl, gt=0)
        max_ttl: float = Field(default=_DEFAULTS.max_ttl, gt=0)
        heavy_threshold: int = Field(default=32 * 1024, gt=0)
        tool_thresholds: dict[str, int] = Field(default_factory=dict)
        budget: Literal["light", "balanced", "strong", "max"] = "balanced"
        read_budget: int = Field(default=16 * 1024, gt=0, le=1024 * 1024)
        events_log: str | None = None
        window_margin: int = Field(default=4096, ge=0)
        model_windows: dict[str, int] = Field(default_factory=dict)

    assert tuple(Model.model_fields) == _KEYS
    return Model


@dataclass(frozen=True, slots=True)
class Settings:
    """The resolved configuration.

    Attributes:
        store: The store URL; ``None`` is the embedded default (local, XDG cache).
        tenant: Tenant for surfaces that need a scope (the CLI); defaults to ``local``.
        user: User for such surfaces; defaults to the OS user name.
        session: Session for such surfaces; defaults to ``default``.
        limits: Store limits.
        heavy_threshold: Results of at least this many bytes are offloaded (32 KiB).
        tool_thresholds: Per-tool heavy thresholds.
        budget: The default stub budget (``light``, ``balanced``, ``strong``, ``max``).
        read_budget: The default byte budget of a model-facing read (16 KiB, at most 1 MiB).
        events_log: A JSON-lines file the CLI appends decision events to; ``None`` for the
            default under the user's state directory.
        window_margin: Tokens the edge guard keeps free below a model's context window.
        model_windows: Context windows by model name prefix, over the guard's built-in table.
        source: Which file was read, if any (for ``--help``-style diagnostics only).
    """

    # Never in the repr: a store URL may hold a password, the scope parts are owner identity.
    store: str | None = dataclasses.field(repr=False)
    tenant: str = dataclasses.field(repr=False)
    user: str = dataclasses.field(repr=False)
    session: str = dataclasses.field(repr=False)
    limits: Limits
    heavy_threshold: int = 32 * 1024
    tool_thresholds: Mapping[str, int] = dataclasses.field(default_factory=dict)
    budget: str = "balanced"
    read_budget: int = 16 * 1024
    events_log: str | None = None
    window_margin: int = 4096
    model_windows: Mapping[str, int] = dataclasses.field(default_factory=dict)
    source: Path | None = None

    def scope(self, **attribution: str | None) -> Scope:
        """The scope these settings name, with optional task/worker/agent attribution."""
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


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read configuration file {path.name}") from exc


def _from_env(environ: Mapping[str, str]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key in _KEYS:
        value = environ.get(ENV_PREFIX + key.upper())
        if value is not None and value != "":
            found[key] = _pairs(key, value) if key in _MAPPINGS else value
    return found


_MAPPINGS = frozenset({"tool_thresholds", "model_windows"})


def _pairs(key: str, value: str) -> dict[str, str]:
    """``CARGOHOLD_TOOL_THRESHOLDS=fetch=65536,grep=8192`` as a mapping (validated later)."""
    pairs: dict[str, str] = {}
    for item in value.split(","):
        name, sep, size = item.partition("=")
        if not sep or not name.strip():
            raise ConfigError(
                f"{ENV_PREFIX}{key.upper()} is a list of name=number, comma-separated"
            )
        pairs[name.strip()] = size.strip()
    return pairs


def _default_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers): still a usable, stable name
        return f"uid-{os.getuid()}"


def load_settings(
    overrides: Mapping[str, Any] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    config_file: str | os.PathLike[str] | None = None,
) -> Settings:
    """Resolve settings once: explicit ``overrides`` > environment > file > defaults.

    Args:
        overrides: Explicit values (``None`` values are ignored).
        environ: The environment to read (``os.environ`` when omitted).
        cwd: Where to start looking for a configuration file.
        config_file: A file to read instead of searching (also ``CARGOHOLD_CONFIG``).

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
    merged: dict[str, Any] = {**file_values, **_from_env(env)}
    merged.update({k: v for k, v in (overrides or {}).items() if v is not None})
    from pydantic import ValidationError

    try:
        model: Any = _model().model_validate(merged)
        limits = Limits(
            max_artifact_bytes=model.max_artifact_bytes,
            session_bytes=model.session_bytes,
            session_objects=model.session_objects,
            store_bytes=model.store_bytes,
            store_objects=model.store_objects,
            default_ttl=model.default_ttl,
            max_ttl=model.max_ttl,
        )
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'config'}: {err['msg']}"
            for err in exc.errors(include_input=False)
        )
        raise ConfigError(f"invalid configuration: {problems}") from None
    except CargoholdError as exc:
        raise ConfigError(f"invalid configuration: {exc}") from None
    for part in ("tenant", "user", "session"):
        value = getattr(model, part)
        if value is not None:
            try:
                check_part(part, value, required=True)
            except CargoholdError as exc:
                raise ConfigError(f"invalid configuration: {part}: {exc}") from None
    return Settings(
        store=model.store or None,
        tenant=model.tenant or DEFAULT_TENANT,
        user=model.user or _default_user(),
        session=model.session or DEFAULT_SESSION,
        limits=limits,
        heavy_threshold=model.heavy_threshold,
        tool_thresholds=dict(model.tool_thresholds),
        budget=model.budget,
        read_budget=model.read_budget,
        events_log=model.events_log or None,
        window_margin=model.window_margin,
        model_windows=dict(model.model_windows),
        source=source,
    )
