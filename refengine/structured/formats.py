"""Strings of the ``format`` values OpenAI's strict mode lists, drawn from the row's draws.

date-time, date, time (RFC 3339, with an offset), duration (ISO 8601), email, hostname,
ipv4, ipv6 and uuid, as xgrammar and llguidance compile them; ``uri`` too. Any other
format is a plain string, as llama.cpp and xgrammar treat it (``known`` says which).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sampler.draws import Draws

_HEX = "0123456789abcdef"
_TLDS = ("com", "org", "net", "io", "dev")
_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _date(draws: Draws, words: Sequence[str]) -> str:
    year, month = draws.integer(1970, 2035), draws.integer(1, 12)
    return f"{year:04d}-{month:02d}-{draws.integer(1, _DAYS[month - 1]):02d}"


def _time(draws: Draws, words: Sequence[str]) -> str:
    clock = f"{draws.integer(0, 23):02d}:{draws.integer(0, 59):02d}:{draws.integer(0, 59):02d}"
    if draws.chance(0.5):
        return clock + "Z"
    sign = "+-"[draws.pick(2)]
    return f"{clock}{sign}{draws.integer(0, 14):02d}:{(0, 30, 45)[draws.pick(3)]:02d}"


def _date_time(draws: Draws, words: Sequence[str]) -> str:
    return f"{_date(draws, words)}T{_time(draws, words)}"


def _duration(draws: Draws, words: Sequence[str]) -> str:
    shape = draws.pick(3)
    if shape == 0:
        return f"P{draws.integer(1, 52)}W"
    days = f"{draws.integer(1, 30)}D" if shape == 2 else ""
    hours, minutes = draws.integer(0, 23), draws.integer(1, 59)
    return f"P{days}T{hours}H{minutes}M" if hours else f"P{days}T{minutes}M"


def _label(draws: Draws, words: Sequence[str]) -> str:
    return words[draws.pick(len(words))].lower()


def _hostname(draws: Draws, words: Sequence[str]) -> str:
    labels = [_label(draws, words) for _ in range(draws.integer(1, 2))]
    return ".".join([*labels, _TLDS[draws.pick(len(_TLDS))]])


def _email(draws: Draws, words: Sequence[str]) -> str:
    return f"{_label(draws, words)}@{_hostname(draws, words)}"


def _ipv4(draws: Draws, words: Sequence[str]) -> str:
    return ".".join(str(draws.integer(0, 255)) for _ in range(4))


def _hex(draws: Draws, count: int) -> str:
    return "".join(_HEX[draws.pick(16)] for _ in range(count))


def _ipv6(draws: Draws, words: Sequence[str]) -> str:
    groups = [_hex(draws, draws.integer(1, 4)).lstrip("0") or "0" for _ in range(8)]
    return ":".join(groups)


def _uuid(draws: Draws, words: Sequence[str]) -> str:
    variant = "89ab"[draws.pick(4)]
    return f"{_hex(draws, 8)}-{_hex(draws, 4)}-4{_hex(draws, 3)}-{variant}{_hex(draws, 3)}-" + (
        _hex(draws, 12)
    )


def _uri(draws: Draws, words: Sequence[str]) -> str:
    return f"https://{_hostname(draws, words)}/{_label(draws, words)}"


FORMATS: dict[str, Callable[[Draws, Sequence[str]], str]] = {
    "date-time": _date_time,
    "date": _date,
    "time": _time,
    "duration": _duration,
    "email": _email,
    "hostname": _hostname,
    "ipv4": _ipv4,
    "ipv6": _ipv6,
    "uuid": _uuid,
    "uri": _uri,
}


def known(name: str) -> bool:
    """Whether ``format: name`` is drawn as that format (else as a plain string)."""
    return name in FORMATS


def draw_format(name: str, draws: Draws, words: Sequence[str]) -> str:
    """A string of format ``name`` (``words``: the vocabulary for names in it)."""
    return FORMATS[name](draws, words)
