"""config.yaml: the schema's defaults, reading it, one-line errors, overrides (writing it: test_config_write)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from support.config_defaults import DOCUMENTED_DEFAULTS

from hermes_tui.config import Config, ConfigError, apply_overrides, load_config, parse_override


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def load_error(tmp_path: Path, text: str) -> ConfigError:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    assert "Traceback" not in message and "pydantic" not in message.lower()
    return info.value


# --------------------------------------------------------------------------- defaults


def test_defaults_match_design():
    assert Config().model_dump() == DOCUMENTED_DEFAULTS


def test_missing_file_gives_defaults_and_is_not_created(tmp_path):
    path = tmp_path / "nope" / "config.yaml"
    assert load_config(path) == Config()
    assert not path.exists()
    assert not path.parent.exists()


def test_default_path_comes_from_paths(tmp_path, monkeypatch):
    monkeypatch.setenv("HERMES_TUI_HOME", str(tmp_path))
    (tmp_path / "config.yaml").write_text("compression:\n  threshold: 0.5\n")
    assert load_config().compression.threshold == 0.5


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n# and another\n", "---\n", "~\n"])
def test_empty_or_comment_only_file_gives_defaults(tmp_path, text):
    assert load_config(write(tmp_path, text)) == Config()


def test_section_with_every_key_commented_out_gives_defaults(tmp_path):
    path = write(
        tmp_path,
        """\
        compression:
          # threshold: 0.5
        auxiliary:
          compression:
        """,
    )
    assert load_config(path) == Config()


def test_partial_file_keeps_other_defaults(tmp_path):
    path = write(
        tmp_path,
        """\
        model:
          provider: openai-api
          base_url: http://localhost:8080/v1
          context_length: 8192
        auxiliary:
          compression:
            provider: extractive
            timeout: 30
            max_tokens: 256
        compression:
          tokenizer: ~/models/qwen
        """,
    )
    config = load_config(path)
    assert config.model.provider == "openai-api"
    assert config.model.context_length == 8192
    assert config.auxiliary.compression.provider == "extractive"
    assert config.auxiliary.compression.timeout == 30.0
    assert isinstance(config.auxiliary.compression.timeout, float)
    assert config.auxiliary.compression.max_tokens == 256
    assert config.compression.tokenizer == "~/models/qwen"
    assert config.compression.threshold == 0.8


def test_int_is_accepted_for_float_fields(tmp_path):
    config = load_config(write(tmp_path, "compression:\n  threshold: 1\n"))
    assert config.compression.threshold == 1.0
    assert isinstance(config.compression.threshold, float)


# --------------------------------------------------------------------------- default file


def test_model_max_tokens_is_a_whole_number_of_at_least_one(tmp_path):
    assert load_config(write(tmp_path, "model:\n  max_tokens: 64\n")).model.max_tokens == 64
    assert Config().model.max_tokens == 1024  # what the app used before the key existed
    for bad, message in (
        ("0", "model.max_tokens: must be at least 1, got 0"),
        ("-5", "model.max_tokens: must be at least 1, got -5"),
        ("2.5", "model.max_tokens: expected a whole number, got 2.5"),
        ('"64"', "model.max_tokens: expected a whole number, got '64' (remove the quotes)"),
        ("null", "model.max_tokens: expected a whole number, got null"),
    ):
        error = load_error(tmp_path, f"model:\n  max_tokens: {bad}\n")
        assert str(error).endswith("line 2: " + message), str(error)
    with pytest.raises(ConfigError, match="model.max_tokens: must be at least 1"):
        Config().with_overrides({"model.max_tokens": 0})


def test_the_chat_clients_take_their_reply_cap_from_model_max_tokens(tiny_model, hf_offline_env):
    from hermes_tui.providers.selection import make_chat_client

    mlx = make_chat_client(Config().with_overrides({
        "model.provider": "mlx", "model.model": str(tiny_model.fp32), "model.max_tokens": 7}).model)
    endpoint = make_chat_client(Config().with_overrides({
        "model.provider": "openai-api", "model.model": "m", "model.base_url": "http://127.0.0.1:9/v1",
        "model.max_tokens": 9}).model)
    assert (mlx.max_tokens, endpoint.max_tokens) == (7, 9)
    # Without a cap of its own, a call is capped by the client's.
    done = mlx.complete([{"role": "user", "content": "hi"}])
    assert done.usage.completion_tokens == 7 and done.usage.finish_reason == "length"


# --------------------------------------------------------------------------- errors


def test_unknown_key_names_line_and_suggests(tmp_path):
    error = load_error(
        tmp_path,
        """\
        compression:
          threshold: 0.7
          micro_compact_evry_n_turns: 2
        """,
    )
    assert str(error).endswith(
        ": line 3: compression.micro_compact_evry_n_turns: unknown key (did you mean micro_compact_every_n_turns?)"
    )
    assert (error.line, error.key) == (3, "compression.micro_compact_evry_n_turns")


def test_unknown_top_level_key(tmp_path):
    error = load_error(tmp_path, "model:\n  provider: auto\ncompresion:\n  enabled: false\n")
    assert str(error).endswith(": line 3: compresion: unknown key (did you mean compression?)")


def test_key_in_the_wrong_section_says_where_it_belongs(tmp_path):
    error = load_error(tmp_path, "compression:\n  timeout: 30\n")
    assert str(error).endswith(": line 2: compression.timeout: unknown key (it belongs under auxiliary.compression)")


def test_wrong_type_names_line_and_key(tmp_path):
    path = write(
        tmp_path,
        """\
        # my settings
        model:
          provider: auto

        compression:
          enabled: true
          threshold: high
        """,
    )
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == f"{path}: line 7: compression.threshold: expected a number, got 'high'"


@pytest.mark.parametrize(
    ("yaml_text", "expected"),
    [
        ("compression:\n  threshold: '0.5'\n", "line 2: compression.threshold: expected a number, got '0.5' (remove the quotes)"),
        ("compression:\n  threshold: 80%\n", "line 2: compression.threshold: expected a number, got '80%' (write a fraction: 0.8 for 80%)"),
        ("compression:\n  protect_first_n: '3'\n", "line 2: compression.protect_first_n: expected a whole number, got '3' (remove the quotes)"),
        ("compression:\n  protect_first_n: 2.5\n", "line 2: compression.protect_first_n: expected a whole number, got 2.5"),
        ("compression:\n  protect_first_n: true\n", "line 2: compression.protect_first_n: expected a whole number, got true"),
        ("compression:\n  enabled: 'yes'\n", "line 2: compression.enabled: expected true or false, got 'yes' (remove the quotes)"),
        ("compression:\n  enabled: 1\n", "line 2: compression.enabled: expected true or false, got 1"),
        ("compression:\n  threshold: true\n", "line 2: compression.threshold: expected a number, got true"),
        ("compression:\n  threshold:\n", "line 2: compression.threshold: expected a number, got null"),
        ("model:\n  model: 1.5\n", 'line 2: model.model: expected text, got 1.5 (put it in quotes: "1.5")'),
        ("model:\n  provider: MLX\n", "line 2: model.provider: expected one of auto, mlx, openai-api; got 'MLX' (did you mean mlx?)"),
        (
            "model:\n  provider: extractive\n",
            (
                "line 2: model.provider: expected one of auto, mlx, openai-api; got 'extractive' "
                "(extractive is only for auxiliary.compression.provider)"
            ),
        ),
        ("compression: 5\n", "line 1: compression: expected a section of keys (key: value lines), got 5"),
        ("compression:\n  - threshold\n", "line 2: compression: expected a section of keys (key: value lines), got a list"),
        ("model:\n  base_url: localhost:8080\n", "line 2: model.base_url: must start with http:// or https:// (or be empty), got 'localhost:8080'"),
    ],
)
def test_wrong_types(tmp_path, yaml_text, expected):
    assert str(load_error(tmp_path, yaml_text)).endswith(": " + expected)


@pytest.mark.parametrize(
    ("yaml_text", "expected"),
    [
        ("compression:\n  threshold: 0\n", "compression.threshold: must be greater than 0 and at most 1, got 0"),
        ("compression:\n  threshold: 1.5\n", "compression.threshold: must be greater than 0 and at most 1, got 1.5"),
        ("compression:\n  target_ratio: 1\n", "compression.target_ratio: must be greater than 0 and less than 1, got 1"),
        ("compression:\n  target_ratio: 0.0\n", "compression.target_ratio: must be greater than 0 and less than 1, got 0.0"),
        ("compression:\n  protect_first_n: -1\n", "compression.protect_first_n: must be at least 0, got -1"),
        ("compression:\n  micro_compact_every_n_turns: 0\n", "compression.micro_compact_every_n_turns: must be at least 1, got 0"),
        (
            "compression:\n  micro_compact_defrag_threshold_tokens: 99\n",
            "compression.micro_compact_defrag_threshold_tokens: must be at least 100, got 99",
        ),
        ("model:\n  context_length: 255\n", "model.context_length: must be at least 256 (or null), got 255"),
        ("auxiliary:\n  compression:\n    timeout: 0\n", "auxiliary.compression.timeout: must be greater than 0, got 0"),
        ("auxiliary:\n  compression:\n    timeout: .inf\n", "auxiliary.compression.timeout: must be a finite number, got inf"),
        ("auxiliary:\n  compression:\n    max_tokens: 0\n", "auxiliary.compression.max_tokens: must be at least 1 (or null), got 0"),
    ],
)
def test_out_of_range(tmp_path, yaml_text, expected):
    error = load_error(tmp_path, yaml_text)
    assert str(error).endswith(f": line {yaml_text.count(chr(10))}: {expected}")


def test_range_edges_are_accepted(tmp_path):
    path = write(
        tmp_path,
        """\
        model:
          context_length: 256
        compression:
          threshold: 1
          protect_first_n: 0
          micro_compact_defrag_threshold_tokens: 100
        """,
    )
    config = load_config(path)
    assert config.compression.threshold == 1.0 and config.model.context_length == 256


def test_api_key_pasted_into_api_key_env_is_refused_without_echoing_it(tmp_path):
    secret = "sk-proj-abc123-DEADBEEF"
    error = load_error(tmp_path, f"auxiliary:\n  compression:\n    api_key_env: {secret}\n")
    assert ": line 3: auxiliary.compression.api_key_env: must be the name of an environment variable" in str(error)
    assert secret not in str(error)


def test_invalid_yaml_names_line_and_column(tmp_path):
    path = write(tmp_path, "compression:\n  threshold: 0.5\n   enabled: true\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert message.startswith(f"{path}: not valid YAML at line 3, column ")
    assert "\n" not in message


def test_invalid_yaml_unclosed_quote(tmp_path):
    error = load_error(tmp_path, 'model:\n  model: "qwen\n')
    assert ": not valid YAML at line " in str(error)


def test_tab_indentation_is_a_yaml_error(tmp_path):
    error = load_error(tmp_path, "compression:\n\tthreshold: 0.5\n")
    assert "not valid YAML at line 2, column 1" in str(error)


@pytest.mark.parametrize(
    ("text", "got"),
    [("- model\n- compression\n", "a list"), ("just a string\n", "'just a string'"), ("42\n", "42")],
)
def test_top_level_must_be_a_mapping(tmp_path, text, got):
    error = load_error(tmp_path, text)
    assert str(error).endswith(f": line 1: the top level must be sections of keys (model, compression, auxiliary), got {got}")


def test_duplicate_key_is_an_error_not_a_silent_loss(tmp_path):
    error = load_error(tmp_path, "compression:\n  threshold: 0.5\n  enabled: true\n  threshold: 0.6\n")
    assert str(error).endswith(": line 4: compression.threshold: duplicate key (also set on line 2)")


def test_several_problems_report_the_first_in_file_order(tmp_path):
    error = load_error(
        tmp_path,
        """\
        auxiliary:
          compression:
            timeout: -1
        compression:
          threshold: high
          bogus: 1
        """,
    )
    assert str(error).endswith(": line 3: auxiliary.compression.timeout: must be greater than 0, got -1 (and 2 more problems)")
    assert [p.line for p in error.problems] == [3, 5, 6]
    assert all("\n" not in str(p) for p in error.problems)


def test_unreadable_file_is_one_line(tmp_path):
    path = tmp_path / "config.yaml"
    path.mkdir()  # a directory where the file should be
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value).startswith(f"{path}: cannot read: ")


def test_not_utf8(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_bytes(b"model:\n  model: \xff\xfe\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value).startswith(f"{path}: not UTF-8 text")


def test_unsafe_tags_are_refused(tmp_path):
    error = load_error(tmp_path, "model: !!python/object/apply:os.system ['true']\n")
    assert "not valid YAML at line 1" in str(error)


# --------------------------------------------------------------------------- overrides


def test_overrides_return_a_validated_copy():
    base = Config()
    changed = apply_overrides(base, {"compression.threshold": 0.5, "auxiliary.compression.provider": "extractive"})
    assert changed.compression.threshold == 0.5
    assert changed.auxiliary.compression.provider == "extractive"
    assert base == Config()


def test_with_overrides_accepts_both_spellings():
    config = Config().with_overrides({"model.context_length": 4096}, compression__protect_first_n=0)
    assert config.model.context_length == 4096
    assert config.compression.protect_first_n == 0


def test_overrides_are_validated():
    with pytest.raises(ConfigError) as info:
        apply_overrides(Config(), {"compression.threshold": 1.5}, origin="--set")
    assert str(info.value) == "--set: compression.threshold: must be greater than 0 and at most 1, got 1.5"
    with pytest.raises(ConfigError) as info:
        Config().with_overrides({"compression.protect_first_n": "3"})
    assert str(info.value) == "compression.protect_first_n: expected a whole number, got '3' (remove the quotes)"


def test_unknown_override_key_suggests():
    with pytest.raises(ConfigError) as info:
        apply_overrides(Config(), {"compression.treshold": 0.5})
    assert str(info.value) == "compression.treshold: unknown key (did you mean threshold?)"
    with pytest.raises(ConfigError):
        apply_overrides(Config(), {"compression.threshold.deeper": 0.5})


def test_parse_override():
    assert parse_override("compression.threshold=0.5") == ("compression.threshold", 0.5)
    assert parse_override("model.context_length=null") == ("model.context_length", None)
    assert parse_override("model.model=mlx-community/Qwen3-0.6B-4bit") == ("model.model", "mlx-community/Qwen3-0.6B-4bit")
    assert parse_override("model.base_url=") == ("model.base_url", "")
    with pytest.raises(ConfigError):
        parse_override("compression.threshold")


# --------------------------------------------------------------------------- more errors


def test_yaml_error_mentions_where_the_broken_construct_started(tmp_path):
    error = load_error(tmp_path, 'model:\n  model: "qwen\n')
    assert str(error).endswith(
        ": not valid YAML at line 3, column 1: found unexpected end of stream "
        "(while scanning a quoted scalar started on line 2)"
    )
    error = load_error(tmp_path, "model: {}\n---\ncompression: {}\n")
    assert str(error).endswith(
        ": not valid YAML at line 2, column 1: expected a single document in the stream, but found another document"
    )


def test_server_name_as_provider_points_to_openai_api(tmp_path):
    error = load_error(tmp_path, "auxiliary:\n  compression:\n    provider: ollama\n")
    assert str(error).endswith(
        ": line 3: auxiliary.compression.provider: expected one of auto, mlx, openai-api, extractive; "
        "got 'ollama' (for an OpenAI-compatible server use openai-api and set base_url)"
    )


# --------------------------------------------------------------------------- mcp_servers


def test_mcp_servers_stdio_and_http(tmp_path):
    path = write(tmp_path, """\
        mcp_servers:
          github:
            command: npx
            args: [-y, server-github]
            env: [GITHUB_TOKEN]
            trust: read-only
            tools: {deny: ["delete_*"]}
          docs:
            url: https://example.com/mcp
            headers: {Authorization: "Bearer ${DOCS_TOKEN}"}
            env_note_is_not_a_key: 1
        """)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value).startswith(f"{path}: line 11: mcp_servers.docs.env_note_is_not_a_key: unknown key")
    path.write_text(path.read_text().replace("    env_note_is_not_a_key: 1\n", ""))
    servers = load_config(path).mcp_servers
    assert servers["github"].transport == "stdio" and servers["docs"].transport == "http"
    assert servers["github"].env == {"GITHUB_TOKEN": "$GITHUB_TOKEN"}  # a list names variables passed as they are
    assert servers["github"].tools.deny == ["delete_*"] and servers["github"].tools.allow is None
    assert servers["docs"].trust == "ask" and servers["docs"].enabled is True


@pytest.mark.parametrize("server, line, expected", [
    ('{command: x, env: {TOKEN: ghp_abc123}}', 2,
     "mcp_servers.a.env: TOKEN must name a variable of our environment ($NAME), not hold a value"),
    ('{command: x, env: [not-a-name]}', 2, "mcp_servers.a.env: a list of variable names to pass"),
    ('{url: "https://x/mcp", headers: {Authorization: "Bearer abc123"}}', 2,
     "mcp_servers.a.headers: header Authorization must take its value from the environment"),
    ('{command: x, url: "https://x/mcp"}', 2, "mcp_servers.a: set either command (stdio) or url"),
    ('{trust: yes-please, command: x}', 2, "mcp_servers.a.trust: expected one of ask, read-only, trusted"),
    ('{command: x, timeout: 0}', 2, "mcp_servers.a.timeout: must be greater than 0"),
    ('{command: x, tools: {allow: read}}', 2, "mcp_servers.a.tools.allow: "),
])
def test_mcp_server_errors_are_one_line_and_never_echo_a_secret(tmp_path, server, line, expected):
    error = load_error(tmp_path, f"mcp_servers:\n  a: {server}\n")
    assert f": line {line}: {expected}" in str(error)
    assert "ghp_abc123" not in str(error) and "abc123" not in str(error)


def test_mcp_server_name_must_be_tool_safe(tmp_path):
    error = load_error(tmp_path, 'mcp_servers:\n  "my server": {command: x}\n')
    assert "mcp_servers: server name 'my server': use 1-32 letters, digits, _ or -" in str(error)
