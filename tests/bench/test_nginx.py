"""The nginx reverse-proxy configuration."""

from __future__ import annotations

from pathlib import Path

from bench.nginx import nginx_command, render_config


def test_config_proxies_without_buffering(tmp_path: Path) -> None:
    text = render_config(upstream="127.0.0.1:9000", host="127.0.0.1", port=8080, prefix=tmp_path)
    for directive in [
        "worker_processes 1;",
        "server 127.0.0.1:9000;",
        "listen 127.0.0.1:8080",
        "proxy_http_version 1.1;",
        'proxy_set_header Connection "";',
        "proxy_buffering off;",
        "proxy_request_buffering off;",
        "access_log off;",
    ]:
        assert directive in text
    assert "keepalive 1024;" in text
    assert f"pid {tmp_path}/nginx.pid;" in text


def test_command_runs_in_the_foreground(tmp_path: Path) -> None:
    command = nginx_command(upstream="127.0.0.1:9000", host="127.0.0.1", port=1, prefix=tmp_path)
    assert command[-2:] == ["-g", "daemon off;"]
    assert (tmp_path / "nginx.conf").read_text().startswith(("user root;", "worker_processes"))
