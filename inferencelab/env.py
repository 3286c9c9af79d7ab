"""The environment, parsed once: settings.py reads every variable through these functions while Django loads the
settings, so each process reads its configuration once, into `django.conf.settings`, and code reads the settings.

One true/false parser (`parse_bool`) for every flag. A value it does not know stops the process at start with the
variable's name, rather than silently meaning "off"; so does an int or float that is not one.
"""
from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured

TRUE = frozenset({"1", "true", "yes", "on"})
FALSE = frozenset({"0", "false", "no", "off", ""})


def parse_bool(value: str | bool, name: str = "value") -> bool:
    """True for 1/true/yes/on, False for 0/false/no/off or empty (any case, spaces ignored); else an error."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in TRUE:
        return True
    if text in FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={value!r}: expected one of 1/true/yes/on or 0/false/no/off")


def _raw(name: str) -> str | None:
    return os.environ.get(name)


def env_str(name: str, default: str) -> str:
    raw = _raw(name)
    return default if raw is None else raw


def env_bool(name: str, default: bool) -> bool:
    raw = _raw(name)
    return default if raw is None else parse_bool(raw, name)


def _number(name: str, default, kind):
    raw = _raw(name)
    if raw is None:
        return default
    try:
        return kind(raw.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r}: expected {'an integer' if kind is int else 'a number'}") from None


def env_int(name: str, default: int) -> int:
    return _number(name, default, int)


def env_float(name: str, default: float) -> float:
    return _number(name, default, float)


def env_list(name: str, default: str) -> list[str]:
    """A comma-separated list; empty items dropped."""
    return [item for item in env_str(name, default).split(",") if item]
