"""The openai SDK is imported ahead of the first call only when a configured model needs it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

PROBE = textwrap.dedent("""
    import sys
    from hermes_tui.config import Config
    from hermes_tui.providers.warm_sdk import warm_openai_sdk
    config = Config.model_validate({CONFIG})
    assert "openai" not in sys.modules
    thread = warm_openai_sdk(config)
    if thread is not None:
        thread.join(120)
    print("started" if thread is not None else "none", "openai" in sys.modules)
""")


@pytest.mark.parametrize(("config", "expected"), [
    ({"model": {"provider": "openai-api", "model": "m", "base_url": "http://127.0.0.1:9/v1"},
      "auxiliary": {"compression": {"provider": "extractive"}}}, "started True"),
    ({"model": {"provider": "mlx", "model": "m"},
      "auxiliary": {"compression": {"provider": "openai-api", "model": "s", "base_url": "http://127.0.0.1:9/v1"}}},
     "started True"),
    ({"model": {"provider": "mlx", "model": "m"}, "auxiliary": {"compression": {"provider": "extractive"}}},
     "none False"),
])
def test_the_sdk_is_warmed_only_for_an_endpoint(config, expected, hermes_home):
    done = subprocess.run([sys.executable, "-c", PROBE.replace("{CONFIG}", repr(config))],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-2:] == expected.split(), done.stdout
