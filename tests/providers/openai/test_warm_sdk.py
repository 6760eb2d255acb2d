"""The openai SDK is imported ahead of the first call only when a configured model needs it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

PROBE = textwrap.dedent("""
    import sys
    from hermes_tui.config import Config
    from hermes_tui.providers.selection import warm_up
    config = Config.model_validate({CONFIG})
    assert "openai" not in sys.modules
    threads = warm_up(config)
    for thread in threads:
        thread.join(120)
    from hermes_tui.providers.openai import transport
    print("started" if threads else "none", "openai" in sys.modules,
          "tls" if transport._ssl_context is not None else "no-tls")
""")


@pytest.mark.parametrize(("config", "expected"), [
    ({"model": {"provider": "openai-api", "model": "m", "base_url": "http://127.0.0.1:9/v1"},
      "auxiliary": {"compression": {"provider": "extractive"}}}, "started True tls"),
    ({"model": {"provider": "mlx", "model": "m"},
      "auxiliary": {"compression": {"provider": "openai-api", "model": "s", "base_url": "http://127.0.0.1:9/v1"}}},
     "started True tls"),
    ({"model": {"provider": "mlx", "model": "m"}, "auxiliary": {"compression": {"provider": "extractive"}}},
     "none False no-tls"),
])
def test_the_sdk_is_warmed_only_for_an_endpoint(config, expected, hermes_home):
    done = subprocess.run([sys.executable, "-c", PROBE.replace("{CONFIG}", repr(config))],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-3:] == expected.split(), done.stdout


def test_every_client_shares_one_tls_context():
    """Made per client, loading the certificates held the interpreter lock on each one's first
    request (the chat's, the compression model's), while the user typed."""
    from hermes_tui.providers.openai.transport import http_client, shared_ssl_context

    pools = [http_client(lambda: None)._transport._pool for _ in range(3)]
    assert all(pool._ssl_context is shared_ssl_context() for pool in pools)
