"""Where the CLI finds the API and its token: flags, then the environment, then a config file.

The file is `$XDG_CONFIG_HOME/ragline/config.toml` (`~/.config/ragline/config.toml` when
XDG_CONFIG_HOME is unset):

    url = "http://127.0.0.1:8000"
    token = "rl_..."
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ragline_cli.errors import NotConfigured, UsageError

URL_ENV = "RAGLINE_URL"
TOKEN_ENV = "RAGLINE_TOKEN"  # noqa: S105  (the variable's name, not a secret)
FILE_KEYS = ("url", "token")


def config_path(env: Mapping[str, str]) -> Path:
    """The config file: under XDG_CONFIG_HOME if set, else ~/.config."""
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "ragline" / "config.toml"


@dataclass(frozen=True)
class Setting:
    """One resolved value and where it came from (a flag, a variable, the file)."""

    value: str
    source: str


@dataclass(frozen=True)
class Config:
    """The API's base URL and the bearer token, each with its source."""

    url: Setting
    token: Setting
    path: Path


def _read_file(path: Path) -> dict[str, str]:
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from exc
    unknown = sorted(set(data) - set(FILE_KEYS))
    if unknown:
        raise UsageError(f"{path}: unknown keys {', '.join(unknown)} (known: url, token)")
    values: dict[str, str] = {}
    for key in FILE_KEYS:
        if key in data:
            if not isinstance(data[key], str):
                raise UsageError(f"{path}: {key} must be a string")
            values[key] = data[key].strip()
    return values


def _pick(flag: str | None, env: Mapping[str, str], name: str, key: str, file: dict[str, str],
          path: Path) -> Setting | None:  # fmt: skip
    if flag:
        return Setting(flag.strip(), f"--{key}")
    if env.get(name, "").strip():
        return Setting(env[name].strip(), name)
    if file.get(key):
        return Setting(file[key], str(path))
    return None


def how_to_configure(path: Path) -> str:
    """What to do when nothing says where the API is or which token to use."""
    return (
        f"set {URL_ENV} and {TOKEN_ENV} (or pass --url and --token), or write them to {path}:\n"
        f'    url = "http://127.0.0.1:8000"\n'
        f'    token = "rl_..."\n'
        "(`make run` prints its admin token and saves it in .ragline/admin_token)"
    )


@dataclass(frozen=True)
class Resolved:
    """What the flags, environment and file give, before checking that it is enough."""

    url: Setting | None
    token: Setting | None
    path: Path


def resolve(url_flag: str | None, token_flag: str | None, env: Mapping[str, str]) -> Resolved:
    """URL and token as far as they are given: a flag beats the environment, which beats the
    file."""
    path = config_path(env)
    file = _read_file(path)
    return Resolved(
        _pick(url_flag, env, URL_ENV, "url", file, path),
        _pick(token_flag, env, TOKEN_ENV, "token", file, path),
        path,
    )


def load(url_flag: str | None, token_flag: str | None, env: Mapping[str, str]) -> Config:
    """The URL and token to call the API with; NotConfigured says how to set what is missing."""
    resolved = resolve(url_flag, token_flag, env)
    url, token = resolved.url, resolved.token
    if url is None or token is None:
        missing = [name for name, value in (("API URL", url), ("token", token)) if value is None]
        raise NotConfigured(
            f"no {' and no '.join(missing)} configured: {how_to_configure(resolved.path)}"
        )
    if not url.value.startswith(("http://", "https://")):
        raise UsageError(f"the API URL from {url.source} must start with http:// or https://")
    return Config(Setting(url.value.rstrip("/"), url.source), token, resolved.path)


def load_from_environment(url_flag: str | None, token_flag: str | None) -> Config:
    """`load` with this process's environment."""
    return load(url_flag, token_flag, os.environ)
