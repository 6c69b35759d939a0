"""engine.llm.redact: credentials in endpoint URLs never reach what is shown or stored."""

from __future__ import annotations

import copy

import pytest

from engine.llm.redact import has_credentials, is_secret_param, redact_mapping, redact_text, redact_url, url_secrets

KEY = "sk-live-0123456789"


@pytest.mark.parametrize(("url", "shown"), [
    (f"http://u:{KEY}@host:8000/v1", "http://***:***@host:8000/v1"),
    (f"https://{KEY}@host/v1", "https://***@host/v1"),  # a key as the user part
    ("http://u:p%40ss@host/v1/", "http://***:***@host/v1/"),
    ("http://u:p@ss@host/v1", "http://***:***@host/v1"),  # an unencoded @: the last one ends userinfo
    (f"https://host/v1?api_key={KEY}&region=eu", "https://host/v1?api_key=***&region=eu"),
    (f"https://host/v1?key={KEY}", "https://host/v1?key=***"),
    (f"https://host/v1?token={KEY};access_token={KEY}", "https://host/v1?token=***;access_token=***"),
    (f"https://host/o?sig={KEY}&X-Amz-Signature={KEY}&subscription-key={KEY}",
     "https://host/o?sig=***&X-Amz-Signature=***&subscription-key=***"),
    (f"https://u:{KEY}@host/v1?api_key={KEY}#frag", "https://***:***@host/v1?api_key=***#frag"),
    ("https://host/v1?model=x&key=", "https://host/v1?model=x&key="),  # nothing to hide
    ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
    ("http://host/users/@me?x=1", "http://host/users/@me?x=1"),  # @ in the path is not userinfo
    ("sim://", "sim://"),
    ("local://", "local://"),
    ("", ""),
    ("not a url", "not a url"),
    ("host:8000", "host:8000"),
    ("http://[::1", "http://[::1"),  # invalid, but no exception
])
def test_redact_url(url, shown):
    assert redact_url(url) == shown
    assert redact_url(shown) == shown  # idempotent


def test_redact_url_leaves_non_strings_alone():
    assert redact_url(None) is None  # type: ignore[arg-type]


def test_secret_param_names():
    for name in ("key", "API_KEY", "apikey", "x-api-key", "token", "access_token", "refresh_token", "sig",
                 "Signature", "client_secret", "password", "code", "api%5Fkey"):
        assert is_secret_param(name), name
    for name in ("model", "region", "stream", "format", "v"):
        assert not is_secret_param(name), name


def test_url_secrets_are_the_password_or_lone_user_and_key_values_raw_and_decoded():
    assert set(url_secrets("http://alice:p%40ss-word@h/v1?api_key=K%2B1&x=y")) == {"p%40ss-word", "p@ss-word",
                                                                                     "K%2B1", "K+1"}
    assert url_secrets(f"http://{KEY}@h/v1") == (KEY,)
    assert url_secrets("http://h/v1") == url_secrets("sim://") == url_secrets("junk") == url_secrets(None) == ()


def test_redact_text_finds_urls_in_messages_and_literal_secrets():
    msg = (f"cannot reach 'http://u:{KEY}@10.0.0.1:8000/v1/chat/completions' "
           f"(<https://gw/v1?api_key={KEY}>) and the proxy said: bad key {KEY}")
    out = redact_text(msg, [KEY])
    assert KEY not in out
    assert out == ("cannot reach 'http://***:***@10.0.0.1:8000/v1/chat/completions' "
                   "(<https://gw/v1?api_key=***>) and the proxy said: bad key ***")
    assert redact_text(f"at http://u:{KEY}@h/v1.", []) == "at http://***:***@h/v1."  # shape alone is enough
    assert redact_text("HTTP 500: ab broke", ["ab", None, ""]) == "HTTP 500: ab broke"  # too short to hunt
    assert redact_text("", [KEY]) == "" and redact_text("plain text", [KEY]) == "plain text"


def test_redact_mapping_scrubs_a_config_dump_without_touching_the_original():
    dump = {
        "task_llm": {"url": f"http://u:{KEY}@h:8000/v1", "model": "m", "max_tokens": 512, "stream": True},
        "reflection": {"url": "sim://", "model": "m"},
        "llm_url": f"https://gw/v1?api_key={KEY}",
        "argv": ["evotui", "headless", "--llm-url", f"http://u:{KEY}@h:8000/v1"],
        "last_error": f"auth failed for {KEY}",  # the key alone, echoed: found via the url keys
        "endpoints": [{"base_url": f"http://{KEY}@h/v1", "calls": 3}],
        "pair": ("x", f"ftp://a:{KEY}@files"),
        "seed": 7,
        "ratio": 0.5,
        "none": None,
    }
    before = copy.deepcopy(dump)
    out = redact_mapping(dump)
    assert dump == before
    assert KEY not in repr(out)
    assert out["task_llm"] == {"url": "http://***:***@h:8000/v1", "model": "m", "max_tokens": 512, "stream": True}
    assert out["reflection"]["url"] == "sim://" and out["llm_url"] == "https://gw/v1?api_key=***"
    assert out["argv"][-1] == "http://***:***@h:8000/v1" and out["last_error"] == "auth failed for ***"
    assert out["endpoints"] == [{"base_url": "http://***@h/v1", "calls": 3}]
    assert out["pair"] == ("x", "ftp://***:***@files")
    assert (out["seed"], out["ratio"], out["none"]) == (7, 0.5, None)


def test_redact_mapping_takes_extra_secrets_and_plain_values():
    assert redact_mapping({"error": f"token {KEY} expired"}, [KEY]) == {"error": "token *** expired"}
    assert redact_mapping(f"see http://u:{KEY}@h") == "see http://***:***@h"
    assert redact_mapping(42) == 42


def test_has_credentials_also_sees_redacted_ones_in_a_stored_config():
    for url in (f"http://u:{KEY}@h/v1", f"https://h/v1?api_key={KEY}", "http://***:***@h/v1", "https://h/v1?key=***"):
        assert has_credentials(url), url
    for url in ("http://h/v1?model=x", "sim://", "local://", "", None, "junk"):
        assert not has_credentials(url), url
