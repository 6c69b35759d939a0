"""Credentials in endpoint URLs, scrubbed before anything is shown or stored.

An endpoint URL may carry a key: in its userinfo (`http://user:KEY@host/v1`) or in a query
parameter (`...?api_key=KEY`). The LLM client sends it; everything else (summary, events, the run
record, logs, error messages) must show the URL through these functions:

- redact_url(url): one URL, with userinfo and credential-like query values replaced by ***.
- redact_text(text, secrets): free text (an httpx or server error message) with every URL in it
  redacted and each given secret (an API key, a URL's password) replaced wherever it appears.
- redact_mapping(obj, secrets): a copy of a dict/list tree (a config dump, an event payload) with
  every string redacted as above.
- url_secrets(url): the secret strings a URL carries, to pass as `secrets` above.
- has_credentials(url): whether a URL carries credentials (or their *** in a stored config).

All of them accept anything (non-URLs, `sim://`, `local://`) and never raise.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import unquote

REDACTED = "***"

# Query parameters whose values are credentials: exact names, and names ending like one
# (x_api_key, subscription-key, refresh_token, client_secret, X-Amz-Signature ...).
_SECRET_NAMES = frozenset({"auth", "code", "credential", "credentials", "password", "passwd", "pwd",
                           "secret", "session", "sig", "signature", "token"})
_SECRET_SUFFIXES = ("key", "token", "secret", "sig", "signature", "password", "credential")

# A URL inside free text: scheme://, then anything up to whitespace or a quote/bracket that
# usually ends a URL in a message ("cannot reach 'http://...'", "<http://...>").
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>`]+")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
# Below this length a literal secret is not searched for in free text: replacing every "ab" in a
# message would garble it, and URLs holding it are still redacted by their shape.
_MIN_SECRET_LEN = 4


def is_secret_param(name: str) -> bool:
    """True for query parameter names that carry credentials (key, api_key, token, sig, ...)."""
    norm = unquote(name).strip().lower().replace("-", "_")
    return norm in _SECRET_NAMES or norm.endswith(_SECRET_SUFFIXES)


def _split(url: str) -> tuple[str, str, str, str] | None:
    """(scheme://, authority, path, query-and-fragment) of an absolute URL, or None for anything else.
    Plain string slicing, not urlsplit: it keeps the text byte-for-byte and cannot raise."""
    scheme, sep, rest = url.partition("://")
    if not sep or not _SCHEME.fullmatch(scheme):
        return None
    end = next((i for i, ch in enumerate(rest) if ch in "/?#"), len(rest))
    authority, tail = rest[:end], rest[end:]
    cut = next((i for i, ch in enumerate(tail) if ch in "?#"), len(tail))
    return scheme + sep, authority, tail[:cut], tail[cut:]


def _redact_query(query: str) -> str:
    """'?a=1&api_key=K#frag' -> '?a=1&api_key=***#frag'."""
    if not query.startswith("?"):
        return query
    body, hash_, frag = query[1:].partition("#")
    fields = []
    for field in re.split(r"([&;])", body):  # keep the separators as they were
        name, eq, value = field.partition("=")
        fields.append(f"{name}={REDACTED}" if eq and value and is_secret_param(name) else field)
    return "?" + "".join(fields) + hash_ + frag


def redact_url(url: str) -> str:
    """The URL with its userinfo (user and password) and credential-like query values as ***.

    http://u:KEY@host/v1 -> http://***:***@host/v1; http://KEY@host -> http://***@host;
    https://host/v1?api_key=K&x=1 -> https://host/v1?api_key=***&x=1. Non-URLs come back as given.
    """
    if not isinstance(url, str):
        return url
    parts = _split(url)
    if parts is None:
        return url
    scheme, authority, path, rest = parts
    userinfo, at, host = authority.rpartition("@")
    if at:
        authority = (f"{REDACTED}:{REDACTED}" if ":" in userinfo else REDACTED) + "@" + host
    return scheme + authority + path + _redact_query(rest)


def has_credentials(url: str | None) -> bool:
    """The URL carries credentials, or had them redacted (a stored config): a run resumed from it
    needs them given again, since nothing stores them."""
    return isinstance(url, str) and (redact_url(url) != url or bool(url_secrets(url)))


def url_secrets(url: str | None) -> tuple[str, ...]:
    """The credentials a URL carries (userinfo and credential-like query values), raw and
    percent-decoded, for redact_text to find wherever a server or library echoes them."""
    parts = _split(url) if isinstance(url, str) else None
    if parts is None:
        return ()
    _, authority, _, rest = parts
    found: list[str] = []
    userinfo, at, _ = authority.rpartition("@")
    if at:
        user, colon, password = userinfo.partition(":")
        # The user part is a secret only when it is the whole userinfo (http://KEY@host).
        found += [password] if colon else [user]
    query = rest[1:].partition("#")[0] if rest.startswith("?") else ""
    for field in re.split(r"[&;]", query):
        name, eq, value = field.partition("=")
        if eq and value and is_secret_param(name):
            found.append(value)
    out = {s for v in found for s in (v, unquote(v)) if s}
    return tuple(sorted(out, key=len, reverse=True))  # longest first: no partial replacement


def redact_text(text: str, secrets: Iterable[str | None] = ()) -> str:
    """Free text with every URL in it redacted (redact_url) and every secret replaced by ***."""
    if not isinstance(text, str) or not text:
        return text
    out = _URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)), text)
    for secret in sorted({s for s in secrets if s and len(s) >= _MIN_SECRET_LEN}, key=len, reverse=True):
        out = out.replace(secret, REDACTED)
    return out


def _is_url_key(key: object) -> bool:
    return isinstance(key, str) and (key.lower() == "url" or key.lower().endswith("_url"))


def redact_mapping(obj: object, secrets: Iterable[str | None] = ()) -> object:
    """A redacted copy of a JSON-like tree (dicts, lists, tuples, strings; other values as they are):
    values under keys named `url` or `*_url` go through redact_url, every other string through
    redact_text. The URLs found under those keys also add their own secrets, so a key echoed
    elsewhere in the tree (an error message, a command line) is scrubbed too."""
    found = set(s for s in secrets if s)
    _collect_url_secrets(obj, found)
    return _walk(obj, tuple(found))


def _collect_url_secrets(obj: object, found: set[str]) -> None:
    if isinstance(obj, dict):
        for key, value in obj.items():
            if _is_url_key(key) and isinstance(value, str):
                found.update(url_secrets(value))
            else:
                _collect_url_secrets(value, found)
    elif isinstance(obj, (list, tuple)):
        for value in obj:
            _collect_url_secrets(value, found)


def _walk(obj: object, secrets: tuple[str, ...]) -> object:
    if isinstance(obj, str):
        return redact_text(obj, secrets)
    if isinstance(obj, dict):
        return {key: (redact_text(redact_url(value), secrets) if _is_url_key(key) and isinstance(value, str)
                      else _walk(value, secrets)) for key, value in obj.items()}
    if isinstance(obj, list):
        return [_walk(value, secrets) for value in obj]
    if isinstance(obj, tuple):
        return tuple(_walk(value, secrets) for value in obj)
    return obj
