"""Finding OpenAI-compatible servers on loopback: real servers on ports the test chooses."""

from __future__ import annotations

import time

import pytest
from support.openai_endpoint import FakeEndpoint
from support.scripted_openai_server import MODEL_ID
from support.servers import ScriptedServer, free_port

from hermes_tui.providers.openai import local_servers


@pytest.fixture
def scripted(tmp_path):
    server = ScriptedServer([{"text": ["Hi."]}], tmp_path / "scripted")
    yield server
    server.stop()


def test_the_usual_ports_cover_the_usual_servers():
    ports = {s.name: s.port for s in local_servers.USUAL_SERVERS}
    assert ports == {"Ollama": 11434, "LM Studio": 1234, "llama.cpp": 8080, "mlx_lm.server": 8080, "vLLM": 8000}
    assert local_servers.server_names(8080) == "llama.cpp or mlx_lm.server"


def test_a_server_answering_v1_models_is_found_and_others_are_not(scripted):
    other = FakeEndpoint()  # an HTTP server that is not a model server (GET answers 501)
    try:
        nothing = free_port()
        other_port = int(other.base_url.split(":")[-1].split("/")[0])
        started = time.monotonic()
        found = local_servers.detect_servers([nothing, other_port, scripted.port])
        took = time.monotonic() - started
    finally:
        other.close()
    assert found == [local_servers.FoundServer(f"a server on port {scripted.port}", scripted.base_url, (MODEL_ID,))]
    assert took < 10, took  # bounds a hang only


def test_changes_name_the_server_and_the_model(scripted):
    server = local_servers.probe(scripted.port)
    assert local_servers.chat_changes(server, MODEL_ID) == {
        "model.provider": "openai-api", "model.base_url": scripted.base_url, "model.model": MODEL_ID,
    }
    assert local_servers.compression_changes(server, MODEL_ID)["auxiliary.compression.base_url"] == scripted.base_url
