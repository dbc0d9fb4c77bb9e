"""wrk's Lua script and the summary line it prints."""

from __future__ import annotations

import pytest

from bench.wrk import lua_script, parse_output

OUTPUT = """Running 5s test @ http://127.0.0.1:8080/v1/chat/completions
  1 threads and 32 connections
WRKJSON {"requests":5000,"duration_us":5000000,"bytes":1,"errors":{"connect":0,"read":1,\
"write":0,"status":2,"timeout":3},"p50_us":1500,"p99_us":9000,"mean_us":2000.5,"max_us":12000}
"""


def test_parse_output() -> None:
    result = parse_output(OUTPUT)
    assert result.requests == 5000
    assert result.rps == pytest.approx(1000)
    assert (result.p50_ms, result.p99_ms) == (1.5, 9.0)
    assert result.errors == 6


def test_parse_output_without_summary() -> None:
    with pytest.raises(ValueError, match="no wrk summary"):
        parse_output("unable to connect to 127.0.0.1:1 Connection refused\n")


def test_script_posts_the_body_verbatim() -> None:
    body = b'{"model":"m","messages":[],"stream":true}'
    script = lua_script(body)
    assert 'wrk.method = "POST"' in script
    assert "[==[" + body.decode() + "]==]" in script
    assert "WRKJSON " in script
    assert "%%" not in script
