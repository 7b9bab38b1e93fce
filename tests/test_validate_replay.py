"""Replay client and fake server (items 2 and 7): timing records, failures kept, HTTP/SSE parsing."""

import asyncio
import json
import math

import numpy as np
import pandas as pd
import pytest

from vidur_specdec.engine.metrics import REQUEST_COLUMNS
from vidur_specdec.validate.counters import scrape, spec_counters
from vidur_specdec.validate.fake_server import FakeEngineConfig, FakeServer
from vidur_specdec.validate.replay import _Response, replay
from vidur_specdec.validate.sse import _SSE, _Rec


def _trace(n=10, gap=0.01, prompt=24, output=30):
    return pd.DataFrame({"request_id": range(n), "sim_index": range(n), "arrival_offset_s": np.arange(n) * gap,
                         "prompt_tokens": [prompt] * n, "output_tokens": [output] * n,
                         "prompt_token_ids": [None] * n})


def test_every_request_is_recorded_with_exact_tokens_and_failures_kept():
    cfg = FakeEngineConfig(k=3, alpha=0.6, faults={"2": "fail", "4": "abort", "6": "hang"})
    with FakeServer(cfg) as srv:
        before = spec_counters(scrape(srv.url))
        res = replay(srv.url, _trace(), timeout_s=1.5)
        after = spec_counters(scrape(srv.url))
    f = res.frame.set_index("request_id")
    assert list(res.frame.columns[:len(REQUEST_COLUMNS)]) == REQUEST_COLUMNS
    assert len(f) == 10
    assert f.loc[2, "status"] == "error" and "HTTP 500" in f.loc[2, "error"]
    assert f.loc[4, "status"] == "error" and "closed" in f.loc[4, "error"]
    assert f.loc[6, "status"] == "timeout"
    for rid in (2, 4, 6):
        assert math.isnan(f.loc[rid, "ttft_ms"]) and math.isnan(f.loc[rid, "e2e_ms"])
    ok = f[f["status"] == "ok"]
    assert len(ok) == 7
    assert (ok["tokens_received"] == 30).all() and (ok["token_counts"] == "usage").all()
    assert (ok["finish_reason"] == "length").all()
    assert (ok["ttft_ms"] > 0).all() and (ok["tpot_ms"] > 0).all()
    assert (ok["e2e_ms"] >= ok["ttft_ms"]).all()
    # chunk-derived acceptance adds up to what the server counted for the completed requests
    assert ok["accepted_tokens"].sum() <= after.accepted - before.accepted
    assert ((ok["accepted_tokens"] + ok["decode_steps"] + 1) == 30).all()
    assert res.stats["status_counts"] == {"ok": 7, "error": 2, "timeout": 1}
    assert len(res.chunks) == 10


def test_an_unreachable_server_is_recorded_per_request():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = replay(f"http://127.0.0.1:{port}", _trace(n=3), model="m", timeout_s=2)
    assert (res.frame["status"] == "error").all()
    assert res.frame["error"].str.contains("Error").all()


def test_fake_server_streams_vllm_format_and_counts_drafts():
    async def go(url):
        import aiohttp

        async with aiohttp.ClientSession() as s:
            body = {"model": "fake-model", "prompt": [5] * 10, "max_tokens": 12, "stream": True,
                    "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
            async with s.post(url + "/v1/completions", json=body) as r:
                assert r.headers["Content-Type"].startswith("text/event-stream")
                text = (await r.read()).decode()
            async with s.post(url + "/v1/completions", json={**body, "stream": False}) as r:
                whole = await r.json()
            async with s.post(url + "/v1/completions", json={**body, "max_tokens": 0}) as r:
                bad = r.status
        return text, whole, bad

    with FakeServer(FakeEngineConfig(k=2, alpha=1.0)) as srv:
        text, whole, bad = asyncio.run(go(srv.url))
        counters = spec_counters(scrape(srv.url))
    events = [e[len("data: "):] for e in text.strip().split("\n\n")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 12
    sizes = np.diff([0] + [c["usage"]["completion_tokens"] for c in chunks[:-1]])
    assert sizes.tolist() == [1, 3, 3, 3, 2]  # first token, then accepted + 1 = 3 per step, truncated at the end
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    assert whole["usage"]["completion_tokens"] == 12
    assert bad == 400
    assert counters.drafts == 8 and counters.accepted == 16 and counters.per_pos == {0: 8, 1: 8}


def _rec(n=3):
    return _Rec("r", 0.0, 1, n)


@pytest.mark.parametrize("split", [1, 3, 7, 1000])
def test_chunked_sse_parsing_survives_any_split(split):
    events = [
        b'data: {"choices":[{"text":"a","finish_reason":null}],"usage":{"completion_tokens":1}}\n\n',
        b'data: {"choices":[{"text":"bc","finish_reason":null}],"usage":{"completion_tokens":3}}\r\n\r\n',
        b'data: {"choices":[{"text":"d","finish_reason":"length"}],"usage":{"completion_tokens":4}}\n\n'
        b'data: {"choices":[],"usage":{"completion_tokens":4}}\n\n',
        b"data: [DONE]\n\n",
    ]
    body = b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events) + b"0\r\n\r\n"
    raw = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n" + body
    loop = asyncio.new_event_loop()
    try:
        rec = _rec(4)
        done = loop.create_future()
        proto = _Response(b"", rec, done)
        for i in range(0, len(raw), split):
            proto.data_received(raw[i:i + split])
        assert done.done() and done.result() is None
    finally:
        loop.close()
    assert rec.tokens == 4 and rec.counts == [1, 2, 1] and rec.done and rec.finish_reason == "length"


def test_sse_without_usage_falls_back_and_errors_raise():
    rec = _rec()
    sse = _SSE(rec)
    sse.feed(b'data: {"choices":[{"text":"x","token_ids":[1,2]}]}\n\ndata: {"choices":[{"text":"y"}]}\n\n', 1.0)
    assert rec.counts == [2, 1] and rec.count_source == "chunks"
    with pytest.raises(ValueError, match="server error"):
        sse.feed(b'data: {"error": {"message": "boom"}}\n\n', 2.0)


def test_http_error_and_content_length_bodies():
    loop = asyncio.new_event_loop()
    try:
        rec = _rec()
        done = loop.create_future()
        proto = _Response(b"", rec, done)
        body = b'{"message":"nope"}'
        proto.data_received(b"HTTP/1.1 404 Not Found\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        assert done.done() and proto.status == 404 and proto.error_body == body
        rec2 = _rec()
        done2 = loop.create_future()
        p2 = _Response(b"", rec2, done2)
        p2.data_received(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n"
                         b'data: {"choices":[{"text":"a"}],"usage":{"completion_tokens":1}}\n\n')
        assert not done2.done()
        p2.connection_lost(None)  # close-delimited body: a clean close ends it
        assert done2.result() is None and rec2.tokens == 1
    finally:
        loop.close()
