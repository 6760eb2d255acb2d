"""The real-model tests: llama-server on Qwen2.5-Coder-0.5B-Instruct (and the 1.5B for the agent's
tasks), each started once per run.

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


def _serve(model: str, tmp_path_factory) -> Iterator[LlamaServer]:
    try:
        server = start_llama_server(model, tmp_path_factory.mktemp("llama_server"))
    except RealModelsMissing as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def small_model_server(tmp_path_factory) -> Iterator[LlamaServer]:
    yield from _serve(SMALL_MODEL, tmp_path_factory)


# Module scope: the 1.5B (about 1 GB of memory) runs only while its tests do, not beside the 0.5B's.
@pytest.fixture(scope="module")
def large_model_server(tmp_path_factory) -> Iterator[LlamaServer]:
    yield from _serve(LARGE_MODEL, tmp_path_factory)
