"""The peers' chat client (evotui/peers/chat.py) against httpx.MockTransport: a connection that
fails (a keep-alive connection the server closed as it was reused) is retried, as the OpenAI
SDK does; HTTP errors are not."""

from __future__ import annotations

import httpx
import pytest

from evotui.peers.chat import TRANSPORT_RETRIES, Chat


def answering_after(failures: int, status: int = 200):
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if len(seen) <= failures:
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.", request=request)
        return httpx.Response(status, json={"choices": [{"message": {"role": "assistant", "content": "hi"}}]})

    return handler, seen


def test_a_dropped_connection_is_retried_and_the_call_counts_once():
    handler, seen = answering_after(1)
    chat = Chat("http://127.0.0.1:9/v1", transport=httpx.MockTransport(handler))
    try:
        assert chat("Say hi.") == "hi"
        assert (chat.calls, chat.retries, len(seen)) == (1, 1, 2)
    finally:
        chat.close()


def test_a_connection_that_keeps_failing_raises_after_the_retries():
    handler, seen = answering_after(TRANSPORT_RETRIES + 1)
    chat = Chat("http://127.0.0.1:9/v1", transport=httpx.MockTransport(handler))
    try:
        with pytest.raises(httpx.RemoteProtocolError):
            chat("Say hi.")
        assert (chat.calls, chat.retries, len(seen)) == (0, TRANSPORT_RETRIES, TRANSPORT_RETRIES + 1)
    finally:
        chat.close()


def test_an_http_error_is_not_retried():
    handler, seen = answering_after(0, status=500)
    chat = Chat("http://127.0.0.1:9/v1", transport=httpx.MockTransport(handler))
    try:
        with pytest.raises(httpx.HTTPStatusError):
            chat("Say hi.")
        assert (chat.retries, len(seen)) == (0, 1)
    finally:
        chat.close()
