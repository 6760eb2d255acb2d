"""Context limit resolution: config, model files, server metadata, table, default, cache.

Server styles are tested against stdlib http.server instances answering with each
server's documented JSON shapes (vLLM, llama.cpp, Ollama, LM Studio, OpenRouter); the
real ``mlx_lm.server`` is asked too, and reports no context length at all.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from support.servers import free_port

from hermes_tui.config import FALLBACK_CONTEXT_LIMIT, ModelConfig
from hermes_tui.providers import context_resolution as cl
from hermes_tui.providers.context_limit import ContextLimit, from_config, from_model_dir
from hermes_tui.providers.context_resolution import ContextLimitResolver, resolve
from hermes_tui.providers.context_table import from_table
from hermes_tui.providers.openai.context_probe import probe_server

# --------------------------------------------------------------------------- a fake server

Route = Callable[[BaseHTTPRequestHandler, bytes], None] | Any


class FakeServer:
    """A stdlib HTTP server answering ``routes[(method, path)]``: JSON data, or a callable."""

    def __init__(self, routes: dict[tuple[str, str], Route]) -> None:
        self.routes = routes
        self.requests: list[dict[str, Any]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _serve(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                owner.requests.append(
                    {"method": method, "path": self.path, "headers": dict(self.headers), "body": body}
                )
                route = owner.routes.get((method, self.path))
                if route is None:
                    send(self, 404, b"Not Found", "text/plain")
                elif callable(route):
                    route(self, body)
                else:
                    send(self, 200, json.dumps(route).encode())

            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.root = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    @property
    def paths(self) -> list[str]:
        return [r["path"] for r in self.requests]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def send(handler: BaseHTTPRequestHandler, status: int, body: bytes, content_type: str = "application/json") -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


@pytest.fixture
def serve() -> Iterator[Callable[[dict], FakeServer]]:
    servers: list[FakeServer] = []

    def start(routes: dict) -> FakeServer:
        server = FakeServer(routes)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


def models(*entries: dict) -> dict:
    return {"object": "list", "data": list(entries)}


# --------------------------------------------------------------------------- config


def test_config_override_wins_over_everything(tiny_model, hermes_home):
    cfg = ModelConfig(provider="mlx", model=str(tiny_model.fp32), context_length=4096)
    assert from_config(cfg) == ContextLimit(4096, "config")
    assert resolve(cfg) == ContextLimit(4096, "config")
    assert ContextLimitResolver.cached(cfg) == ContextLimit(4096, "config")
    # A config answer is not cached: changing the config changes the answer at once.
    assert not (hermes_home / "cache" / cl.CACHE_FILE).exists()


def test_no_override():
    assert from_config(ModelConfig()) is None


# --------------------------------------------------------------------------- model files


def test_tiny_model_folder(tiny_model):
    assert from_model_dir(tiny_model.fp32) == ContextLimit(2048, "model-config")
    assert from_model_dir(str(tiny_model.q4)) == ContextLimit(2048, "model-config")
    assert from_model_dir(tiny_model.fp32 / "config.json") == ContextLimit(2048, "model-config")


def write_model(folder: Path, config: dict | None = None, tokenizer: dict | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config))
    if tokenizer is not None:
        (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer))
    return folder


def test_nested_text_config(tmp_path):
    folder = write_model(
        tmp_path / "gemma3",
        {"model_type": "gemma3", "text_config": {"max_position_embeddings": 131072, "sliding_window": 1024},
         "vision_config": {"image_size": 896}},
    )
    assert from_model_dir(folder) == ContextLimit(131072, "model-config")


def test_sliding_window_is_ignored_and_key_priority(tmp_path):
    folder = write_model(
        tmp_path / "m", {"sliding_window": 4096, "n_positions": 1024, "max_position_embeddings": 32768}
    )
    assert from_model_dir(folder).tokens == 32768
    folder = write_model(tmp_path / "gpt2", {"n_positions": 1024, "n_ctx": 1024})
    assert from_model_dir(folder).tokens == 1024
    folder = write_model(tmp_path / "mpt", {"max_seq_len": 2048})
    assert from_model_dir(folder).tokens == 2048


def test_tokenizer_model_max_length(tmp_path):
    # transformers' "no limit" placeholder, int(1e30), is not a context length.
    placeholder = 1000000000000000019884624838656
    absurd = write_model(tmp_path / "absurd", {"model_type": "x"}, {"model_max_length": placeholder})
    assert from_model_dir(absurd) is None
    # A real model_max_length is the fallback when config.json has no limit...
    only_tokenizer = write_model(tmp_path / "tok", {"model_type": "x"}, {"model_max_length": 16384})
    assert from_model_dir(only_tokenizer) == ContextLimit(16384, "model-config")
    # ...and config.json wins when it has one.
    both = write_model(tmp_path / "both", {"max_position_embeddings": 8192}, {"model_max_length": placeholder})
    assert from_model_dir(both).tokens == 8192


def test_bad_model_files(tmp_path):
    assert from_model_dir(tmp_path / "missing") is None
    assert from_model_dir("") is None
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    assert from_model_dir(broken) is None
    odd = write_model(tmp_path / "odd", {"max_position_embeddings": "lots", "n_ctx": -1, "text_config": [1]})
    assert from_model_dir(odd) is None
    assert from_model_dir(write_model(tmp_path / "list", ["not", "a", "dict"])) is None


def test_hf_repo_id_from_the_local_cache(tmp_path, monkeypatch):
    hf_home = tmp_path / "hf_home"
    repo = hf_home / "hub" / "models--org--name"
    commit = "0123456789abcdef0123456789abcdef01234567"
    snapshot = repo / "snapshots" / commit
    write_model(snapshot, {"max_position_embeddings": 40960}, {"model_max_length": 131072})
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setenv("HF_HOME", str(hf_home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        monkeypatch.delenv(var, raising=False)

    assert from_model_dir("org/name") == ContextLimit(40960, "model-config")
    assert from_model_dir("org/other") is None  # not cached: no download, just None
    assert from_model_dir("not-a-repo-id") is None


def test_resolve_uses_cached_hf_repo_for_mlx(tmp_path, monkeypatch, hermes_home):
    hf_home = tmp_path / "hf_home"
    repo = hf_home / "hub" / "models--mlx-community--Qwen3-0.6B-4bit"
    commit = "f" * 40
    write_model(repo / "snapshots" / commit, {"max_position_embeddings": 40960})
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setenv("HF_HOME", str(hf_home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    cfg = ModelConfig(provider="mlx", model="mlx-community/Qwen3-0.6B-4bit")
    # The model's own config (40960) beats the table's Qwen3 entry (32768).
    assert resolve(cfg) == ContextLimit(40960, "model-config")


# --------------------------------------------------------------------------- the real mlx_lm.server


@pytest.mark.integration
def test_mlx_server_reports_no_context_length(mlx_server, hermes_home):
    """mlx_lm.server's /v1/models lists only id, object and created (mlx_lm 0.32).

    It has no /props, /api/v0 or /api/show either, so the probe finds nothing; the
    window comes from the model's own config.json, since the served id is a local path.
    """
    with urllib.request.urlopen(f"{mlx_server.base_url}/models", timeout=10) as response:
        listing = json.loads(response.read())
    entries = listing["data"]
    assert entries, listing
    for entry in entries:
        assert set(entry) == {"id", "object", "created"}
    assert any(Path(e["id"]) == Path(mlx_server.model).resolve() for e in entries)

    started = time.monotonic()
    assert probe_server(mlx_server.base_url, mlx_server.model) is None
    assert time.monotonic() - started < 5

    # openai-api against mlx_lm.server, model named by its local folder: model-config.
    cfg = ModelConfig(provider="openai-api", base_url=mlx_server.base_url, model=mlx_server.model)
    assert resolve(cfg) == ContextLimit(2048, "model-config")

    # A model name that is neither a folder nor in the table: the default.
    cfg = ModelConfig(provider="openai-api", base_url=mlx_server.base_url, model="my-local-model")
    assert resolve(cfg) == ContextLimit(FALLBACK_CONTEXT_LIMIT, "default")


# --------------------------------------------------------------------------- server styles


def test_vllm_max_model_len(serve):
    server = serve({("GET", "/v1/models"): models(
        {"id": "Qwen/Qwen2.5-7B-Instruct", "object": "model", "owned_by": "vllm",
         "root": "Qwen/Qwen2.5-7B-Instruct", "parent": None, "max_model_len": 16384},
    )})
    assert probe_server(f"{server.root}/v1", "Qwen/Qwen2.5-7B-Instruct") == ContextLimit(16384, "server")
    assert server.paths == ["/v1/models"]  # one request when /models answers


def test_llama_cpp_props_beats_n_ctx_train(serve):
    server = serve({
        ("GET", "/v1/models"): models(
            {"id": "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf", "object": "model", "owned_by": "llamacpp",
             "meta": {"vocab_type": 2, "n_vocab": 128256, "n_ctx_train": 131072, "n_embd": 4096}},
        ),
        ("GET", "/props"): {"default_generation_settings": {"n_ctx": 4096, "params": {}}, "total_slots": 1,
                            "model_path": "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf"},
    })
    # -c 4096 on a 128K model: the server's 4096 is the window, not the training 131072.
    assert probe_server(f"{server.root}/v1", "whatever-alias") == ContextLimit(4096, "server")
    assert server.paths == ["/v1/models", "/props"]


def test_llama_cpp_n_ctx_train_when_props_is_missing(serve):
    server = serve({("GET", "/v1/models"): models({"id": "m.gguf", "meta": {"n_ctx_train": 131072}})})
    assert probe_server(f"{server.root}/v1", "m.gguf") == ContextLimit(131072, "server")
    assert server.paths == ["/v1/models", "/props"]  # llama.cpp: no LM Studio / Ollama probes


def test_llama_cpp_meta_n_ctx(serve):
    server = serve({("GET", "/v1/models"): models({"id": "m", "meta": {"n_ctx": 8192, "n_ctx_train": 131072}})})
    assert probe_server(f"{server.root}/v1", "m") == ContextLimit(8192, "server")


def test_llama_cpp_props_only(serve):
    server = serve({("GET", "/props"): {"default_generation_settings": {"n_ctx": 2048}}})
    assert probe_server(f"{server.root}/v1", "m") == ContextLimit(2048, "server")


def ollama_show(parameters: str = "", context_length: int = 131072) -> dict:
    return {
        "modelfile": "# Modelfile", "parameters": parameters, "template": "{{ .Prompt }}",
        "details": {"format": "gguf", "family": "llama"},
        "model_info": {"general.architecture": "llama", "general.parameter_count": 3212749888,
                       "llama.context_length": context_length, "llama.embedding_length": 3072},
    }


def test_ollama_api_show_model_info(serve):
    server = serve({
        ("GET", "/v1/models"): models({"id": "llama3.2:latest", "object": "model", "owned_by": "library"}),
        ("POST", "/api/show"): ollama_show(),
    })
    assert probe_server(f"{server.root}/v1", "llama3.2") == ContextLimit(131072, "server")
    show = next(r for r in server.requests if r["path"] == "/api/show")
    assert json.loads(show["body"])["model"] == "llama3.2"
    assert server.paths[0] == "/v1/models" and "/props" in server.paths


def test_ollama_num_ctx_parameter_beats_model_info(serve):
    server = serve({("POST", "/api/show"): ollama_show('stop "<|eot_id|>"\nnum_ctx 8192\ntemperature 0.6')})
    assert probe_server(f"{server.root}/v1", "llama3.2:3b") == ContextLimit(8192, "server")


def test_ollama_loaded_model_context_from_api_ps(serve):
    server = serve({
        ("POST", "/api/show"): ollama_show(),
        ("GET", "/api/ps"): {"models": [
            {"name": "qwen2.5:7b", "model": "qwen2.5:7b", "context_length": 32768},
            {"name": "llama3.2:latest", "model": "llama3.2:latest", "size_vram": 1, "context_length": 4096},
        ]},
    })
    assert probe_server(f"{server.root}/v1", "llama3.2") == ContextLimit(4096, "server")


def test_lm_studio_max_context_length_in_models(serve):
    server = serve({("GET", "/v1/models"): models(
        {"id": "qwen2-vl-7b-instruct", "object": "model", "type": "vlm", "state": "not-loaded",
         "max_context_length": 32768},
        {"id": "meta-llama-3.1-8b-instruct", "object": "model", "type": "llm", "state": "not-loaded",
         "max_context_length": 131072},
    )})
    assert probe_server(f"{server.root}/v1", "meta-llama-3.1-8b-instruct") == ContextLimit(131072, "server")


def test_lm_studio_rest_api_loaded_context_length(serve):
    server = serve({
        ("GET", "/v1/models"): models({"id": "qwen/qwen3-4b", "object": "model", "owned_by": "organization_owner"}),
        ("GET", "/api/v0/models/qwen%2Fqwen3-4b"): {
            "id": "qwen/qwen3-4b", "object": "model", "type": "llm", "state": "loaded",
            "max_context_length": 32768, "loaded_context_length": 4096,
        },
    })
    assert probe_server(f"{server.root}/v1", "qwen/qwen3-4b") == ContextLimit(4096, "server")


def test_lm_studio_rest_v1_loaded_instance(serve):
    server = serve({("GET", "/api/v1/models"): {"models": [
        {"type": "llm", "key": "gemma-3-270m-it-qat", "architecture": "gemma3",
         "loaded_instances": [{"id": "gemma-3-270m-it-qat", "config": {"context_length": 4096}}],
         "max_context_length": 32768, "format": "gguf"},
        {"type": "embedding", "key": "text-embedding-nomic-embed-text-v1.5", "loaded_instances": [],
         "max_context_length": 2048},
    ]}})
    assert probe_server(f"{server.root}/api/v1", "gemma-3-270m-it-qat") == ContextLimit(4096, "server")
    assert probe_server(f"{server.root}/api/v1", "text-embedding-nomic-embed-text-v1.5") == ContextLimit(
        2048, "server"
    )


def test_openrouter_context_length_and_api_key(serve):
    server = serve({("GET", "/api/v1/models"): {"data": [
        {"id": "openai/gpt-4o", "context_length": 128000, "top_provider": {"context_length": 128000}},
        {"id": "meta-llama/llama-3.1-8b-instruct", "context_length": 131072,
         "top_provider": {"context_length": 16384, "max_completion_tokens": 16384}},
        {"id": "x/provider-only", "top_provider": {"context_length": 65536}},
    ]}})
    base = f"{server.root}/api/v1"
    assert probe_server(base, "meta-llama/llama-3.1-8b-instruct", api_key="sk-test") == ContextLimit(131072, "server")
    assert server.requests[0]["headers"]["Authorization"] == "Bearer sk-test"
    assert probe_server(base, "x/provider-only") == ContextLimit(65536, "server")
    assert "Authorization" not in server.requests[-1]["headers"]
    # Several models and none is ours: nothing to read (the follow-up /props, /api/v0
    # and /api/show requests get 404s here, as from a hosted API).
    assert probe_server(base, "some/unknown-model") is None


def test_only_entry_is_used_when_no_name_matches(serve):
    server = serve({("GET", "/v1/models"): models({"id": "served-name", "max_model_len": 8192})})
    assert probe_server(f"{server.root}/v1/", "configured-name") == ContextLimit(8192, "server")


def test_closed_port_is_none_quickly():
    started = time.monotonic()
    assert probe_server(f"http://127.0.0.1:{free_port()}/v1", "m", timeout=5.0) is None
    assert time.monotonic() - started < 1.0


def test_slow_server_times_out_once(serve):
    def slow(handler, _body):
        time.sleep(2.0)
        try:
            send(handler, 200, json.dumps(models({"id": "m", "max_model_len": 1})).encode())
        except OSError:
            pass  # the client gave up long ago

    server = serve({("GET", "/v1/models"): slow})
    started = time.monotonic()
    assert probe_server(f"{server.root}/v1", "m", timeout=0.3) is None
    assert time.monotonic() - started < 1.5
    assert server.paths == ["/v1/models"]  # no further endpoints once it timed out


@pytest.mark.parametrize(
    "body",
    [b"{not json", b"", b"[1, 2, 3]", b'{"data": "nope"}', b'{"data": [{"id": "m", "max_model_len": "lots"}]}',
     b'{"data": [{"id": "m", "max_model_len": true}]}', b'{"data": [{"id": "m", "context_length": 1e40}]}',
     b'{"data": [{"id": "m", "meta": [1]}]}'],
)
def test_odd_json_is_none(serve, body):
    server = serve({
        ("GET", "/v1/models"): lambda handler, _b: send(handler, 200, body),
        ("GET", "/props"): lambda handler, _b: send(handler, 200, body),
        ("POST", "/api/show"): lambda handler, _b: send(handler, 200, body),
    })
    assert probe_server(f"{server.root}/v1", "m") is None


def test_http_errors_are_none(serve):
    server = serve({("GET", "/v1/models"): lambda handler, _b: send(handler, 500, b'{"error": "boom"}')})
    assert probe_server(f"{server.root}/v1", "m") is None
    assert probe_server("", "m") is None
    assert probe_server("not a url", "m") is None


# --------------------------------------------------------------------------- table and default


@pytest.mark.parametrize(
    ("name", "tokens"),
    [
        ("meta-llama/Llama-3.1-8B-Instruct", 131072),
        ("mlx-community/Llama-3.2-3B-Instruct-4bit", 131072),
        ("meta-llama/Meta-Llama-3-8B-Instruct", 8192),  # llama-3 (3.0), not 3.1
        ("llama3.3:70b", 131072),
        ("Qwen/Qwen2.5-7B-Instruct", 32768),
        ("qwen3:8b", 32768),
        ("Qwen/Qwen3-4B-Instruct-2507", 262144),
        ("mistralai/Mistral-7B-Instruct-v0.3", 32768),
        ("google/gemma-2-9b-it", 8192),
        ("google/gemma-3-12b-it", 131072),
        ("mlx-community/gemma-3-1b-it-qat-4bit", 32768),  # the 1B model beats gemma-3
        ("gemma3:1b", 32768),
        ("microsoft/Phi-3-mini-4k-instruct", 4096),
        ("microsoft/Phi-3.5-mini-instruct", 131072),
        ("microsoft/Phi-4-mini-instruct", 131072),  # phi-4-mini beats phi-4
        ("microsoft/phi-4", 16384),
        ("HuggingFaceTB/SmolLM2-135M-Instruct", 8192),
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", 131072),
        ("gpt-4o-mini", 128000),
        ("gpt-4.1", 1047576),
        ("GPT-4.1-MINI", 1047576),
    ],
)
def test_table_most_specific_match(name, tokens):
    assert from_table(name) == ContextLimit(tokens, "table")


@pytest.mark.parametrize("name", ["", "my-finetune", "gemma-2b", "qwen-2.50", "llama-3.10-8b", "/tmp/models/fp32"])
def test_table_misses(name):
    assert from_table(name) is None


def test_table_reads_a_local_folder_name(tmp_path):
    assert from_table(str(tmp_path / "models" / "Qwen2.5-0.5B-Instruct-4bit")) == ContextLimit(32768, "table")


def test_default_and_table_in_resolve(hermes_home):
    mystery = ModelConfig(provider="openai-api", model="mystery")
    assert resolve(mystery) == ContextLimit(32_768, "default")
    assert resolve(ModelConfig(provider="openai-api", model="gpt-4o")) == ContextLimit(128000, "table")
    # Neither is cached: a later probe may still find the real value.
    assert not (hermes_home / "cache" / cl.CACHE_FILE).exists()


def test_server_window_beats_the_model_files(serve, tiny_model, hermes_home):
    # vLLM serving a local folder with --max-model-len 1024: the server's 1024 is the
    # window, not config.json's 2048.
    model = str(tiny_model.fp32)
    server = serve({("GET", "/v1/models"): models({"id": model, "max_model_len": 1024})})
    cfg = ModelConfig(provider="openai-api", base_url=f"{server.root}/v1", model=model)
    assert resolve(cfg) == ContextLimit(1024, "server")
    # The same folder run in-process (provider mlx): its config.json.
    cfg = ModelConfig(provider="mlx", base_url=f"{server.root}/v1", model=model)
    assert resolve(cfg) == ContextLimit(2048, "model-config")


def test_unreachable_server_falls_back_to_table(hermes_home):
    cfg = ModelConfig(provider="openai-api", base_url=f"http://127.0.0.1:{free_port()}/v1", model="qwen2.5:7b")
    assert resolve(cfg) == ContextLimit(32768, "table")


# --------------------------------------------------------------------------- disk cache


def vllm(serve, tokens: int = 16384) -> FakeServer:
    return serve({("GET", "/v1/models"): models({"id": "served", "max_model_len": tokens})})


def test_cache_round_trip(serve, hermes_home, monkeypatch):
    server = vllm(serve)
    monkeypatch.setenv("TEST_CTX_KEY", "sk-from-env")
    cfg = ModelConfig(provider="openai-api", base_url=f"{server.root}/v1", model="served", api_key_env="TEST_CTX_KEY")
    assert ContextLimitResolver.cached(cfg) is None
    assert resolve(cfg) == ContextLimit(16384, "server")
    assert server.requests[0]["headers"]["Authorization"] == "Bearer sk-from-env"

    cache_file = hermes_home / "cache" / cl.CACHE_FILE
    stored = json.loads(cache_file.read_text())
    assert stored["entries"][f"openai-api|{server.root}/v1|served"]["tokens"] == 16384

    server.close()  # no server now: the answer comes from the disk
    assert resolve(cfg) == ContextLimit(16384, "cache:server")
    assert ContextLimitResolver.cached(cfg) == ContextLimit(16384, "cache:server")
    # Keyed by provider, base URL and model: another model is not known.
    other = cfg.model_copy(update={"model": "other"})
    assert ContextLimitResolver.cached(other) is None
    # use_cache=False asks the sources again (the server is gone: table, then default).
    assert resolve(cfg, use_cache=False) == ContextLimit(FALLBACK_CONTEXT_LIMIT, "default")


def test_model_config_results_are_cached(tiny_model, hermes_home):
    cfg = ModelConfig(provider="mlx", model=str(tiny_model.fp32))
    assert resolve(cfg) == ContextLimit(2048, "model-config")
    assert ContextLimitResolver.cached(cfg) == ContextLimit(2048, "cache:model-config")


@pytest.mark.parametrize(
    "garbage", [b"{broken", b"", b"[]", b'{"version": 1, "entries": []}', b'{"version": 99, "entries": {}}',
                b'{"version": 1, "entries": {"openai-api|x|y": "nope"}}', b"\xff\xfe\x00"],
)
def test_corrupt_cache_is_ignored_and_rewritten(serve, hermes_home, garbage):
    cache_file = hermes_home / "cache" / cl.CACHE_FILE
    cache_file.parent.mkdir(parents=True)
    cache_file.write_bytes(garbage)
    server = vllm(serve, 32000)
    cfg = ModelConfig(provider="openai-api", base_url=f"{server.root}/v1", model="served")
    assert ContextLimitResolver.cached(cfg) is None
    assert resolve(cfg) == ContextLimit(32000, "server")
    stored = json.loads(cache_file.read_text())
    assert stored["version"] == 1 and stored["entries"][cl.cache_key(cfg)]["source"] == "server"
    assert resolve(cfg) == ContextLimit(32000, "cache:server")
    assert not [p for p in cache_file.parent.iterdir() if p.name.endswith(".tmp")]


def test_unwritable_cache_never_fails_the_caller(serve, hermes_home):
    (hermes_home / "cache").write_text("a file where the cache folder should be")
    server = vllm(serve)
    cfg = ModelConfig(provider="openai-api", base_url=f"{server.root}/v1", model="served")
    assert resolve(cfg) == ContextLimit(16384, "server")
    assert ContextLimitResolver.cached(cfg) is None


# --------------------------------------------------------------------------- background resolver


def test_background_resolver(serve, hermes_home):
    release = threading.Event()

    def slow(handler, _body):
        release.wait(10)
        send(handler, 200, json.dumps(models({"id": "served", "max_model_len": 24576})).encode())

    server = serve({("GET", "/v1/models"): slow})
    cfg = ModelConfig(provider="openai-api", base_url=f"{server.root}/v1", model="served")
    calls: list[tuple[ContextLimit, str]] = []
    called = threading.Event()

    def on_resolved(limit: ContextLimit) -> None:
        calls.append((limit, threading.current_thread().name))
        called.set()

    resolver = ContextLimitResolver()
    assert resolver.cached(cfg) is None
    started = time.monotonic()
    assert resolver.start(cfg, on_resolved) is resolver
    assert time.monotonic() - started < 0.5  # start() does not block
    assert resolver.result is None and not resolver.done
    assert resolver.wait(0.2) is None  # still waiting on the slow server
    assert calls == []

    release.set()
    assert called.wait(10)
    assert resolver.wait(10) == ContextLimit(24576, "server")
    assert resolver.result == ContextLimit(24576, "server") and resolver.done
    assert calls == [(ContextLimit(24576, "server"), "hermes-context-limit")]
    # Next start-up knows it without asking the server.
    assert ContextLimitResolver.cached(cfg) == ContextLimit(24576, "cache:server")
    with pytest.raises(RuntimeError):
        resolver.start(cfg, on_resolved)


def test_background_resolver_callback_error_is_contained(hermes_home, caplog):
    cfg = ModelConfig(provider="openai-api", model="gpt-4o")

    def broken(limit: ContextLimit) -> None:
        raise ValueError("callback bug")

    resolver = ContextLimitResolver().start(cfg, broken)
    assert resolver.wait(5) == ContextLimit(128000, "table")
    resolver._thread.join(5)
    assert "context limit callback failed" in caplog.text


# --------------------------------------------------------------------------- junk answers

DEEP = b'{"data": ' * 5000 + b"null" + b"}" * 5000
LONG_NUMBER = b'{"data": [{"id": "m", "max_model_len": ' + b"9" * 5000 + b"}]}"


def one_line_warnings(caplog) -> list[str]:
    records = [r for r in caplog.records if r.name.startswith("hermes_tui") and r.levelno >= 30]
    assert all(r.exc_info is None and "\n" not in r.getMessage() for r in records)
    return [r.getMessage() for r in records]


@pytest.mark.parametrize("body, problem", [(DEEP, "too deeply nested"), (LONG_NUMBER, "number too long")])
def test_a_junk_server_answer_is_one_warning_and_the_table_answers(serve, hermes_home, caplog, body, problem):
    server = serve({
        ("GET", "/v1/models"): lambda handler, _b: send(handler, 200, body),
        ("GET", "/props"): lambda handler, _b: send(handler, 200, body),
    })
    cfg = ModelConfig(provider="openai-api", base_url=f"{server.root}/v1", model="qwen2.5:7b")
    with caplog.at_level("DEBUG", logger="hermes_tui"):
        assert resolve(cfg) == ContextLimit(32768, "table")
    warnings = one_line_warnings(caplog)
    assert any(f"{server.root}/v1/models" in w and problem in w for w in warnings), caplog.text
    assert "Traceback" not in caplog.text


def test_a_deeply_nested_model_config_is_one_warning_and_the_table_answers(tmp_path, hermes_home, caplog):
    folder = tmp_path / "Qwen2.5-7B-Instruct"
    folder.mkdir()
    (folder / "config.json").write_bytes(b'{"text_config": ' * 5000 + b"{}" + b"}" * 5000)
    with caplog.at_level("DEBUG", logger="hermes_tui"):
        assert resolve(ModelConfig(provider="mlx", model=str(folder))) == ContextLimit(32768, "table")
    warnings = one_line_warnings(caplog)
    assert any(str(folder / "config.json") in w and "too deeply nested" in w for w in warnings), caplog.text
