"""nginx as a plain reverse proxy: the reference a gateway should come close to.

One worker, no access log, HTTP/1.1 to the engine over a keep-alive pool,
buffering off both ways so streamed chunks pass as they arrive. It runs in the
foreground (``daemon off``) from a config written into a temporary prefix, so
the harness owns the process and nothing touches /etc/nginx.
"""

from __future__ import annotations

import os
from pathlib import Path

_CONFIG = """\
%(user)sworker_processes 1;
worker_rlimit_nofile 65536;
pid %(prefix)s/nginx.pid;
error_log %(prefix)s/error.log warn;
events {
    worker_connections 16384;
    multi_accept on;
}
http {
    access_log off;
    client_body_temp_path %(prefix)s/body;
    proxy_temp_path %(prefix)s/proxy;
    fastcgi_temp_path %(prefix)s/fastcgi;
    uwsgi_temp_path %(prefix)s/uwsgi;
    scgi_temp_path %(prefix)s/scgi;
    keepalive_requests 1000000;
    upstream engine {
        server %(upstream)s;
        keepalive 1024;
        keepalive_requests 1000000;
    }
    server {
        listen %(host)s:%(port)d backlog=4096;
        location / {
            proxy_pass http://engine;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_request_buffering off;
            proxy_read_timeout 3600s;
        }
    }
}
"""


def render_config(*, upstream: str, host: str, port: int, prefix: Path) -> str:
    """The nginx.conf text: ``upstream`` is ``host:port`` of the engine."""
    # As root, nginx drops its worker to "nobody", who could not write the prefix.
    user = "user root;\n" if os.geteuid() == 0 else ""
    return _CONFIG % {
        "user": user,
        "upstream": upstream,
        "host": host,
        "port": port,
        "prefix": prefix,
    }


def nginx_command(*, upstream: str, host: str, port: int, prefix: Path) -> list[str]:
    """Write the config under ``prefix`` and return the foreground nginx command line."""
    prefix.mkdir(parents=True, exist_ok=True)
    config = prefix / "nginx.conf"
    config.write_text(render_config(upstream=upstream, host=host, port=port, prefix=prefix))
    return ["nginx", "-p", str(prefix), "-c", str(config), "-g", "daemon off;"]
