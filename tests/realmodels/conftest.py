"""The real-model tests: llama-server on Qwen2.5-Coder-0.5B-Instruct (compaction) and on
Qwen2.5-Coder-1.5B-Instruct (the agent: the first-run screen's choice), each once per run.

Deselected by the plain ``uv run pytest`` (the ``realmodels`` marker); ``.ci/run`` runs
``../shared/realmodels/setup`` and then ``uv run pytest -m realmodels``. Without the models
the tests fail, saying to run the setup: selected on purpose, they must not pass silently.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.llama_server import (
    LARGE_MODEL,
    SMALL_MODEL,
    LlamaServer,
    RealModelsMissing,
    start_llama_server,
)


def served(model: str, tmp_path_factory, *extra: str) -> Iterator[LlamaServer]:
    """llama-server on ``model`` for the session; a test run without the models fails here."""
    try:
        server = start_llama_server(model, tmp_path_factory.mktemp("llama_server"), extra=extra)
    except RealModelsMissing as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def small_model_server(tmp_path_factory) -> Iterator[LlamaServer]:
    yield from served(SMALL_MODEL, tmp_path_factory)


@pytest.fixture(scope="session")
def coder_model_server(tmp_path_factory) -> Iterator[LlamaServer]:
    """The 1.5B model at temperature 0: the agent's test asks for one outcome of a sampled
    run, and greedy decoding makes that outcome the same on every run of this build."""
    yield from served(LARGE_MODEL, tmp_path_factory, "--temp", "0")
