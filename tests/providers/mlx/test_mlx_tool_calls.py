"""Tool calls on the in-process MLX path: mlx-lm's tool parsers, through the real
tokenizer wrapper, on output recorded in each family's format; and the tiny model
(whose template has no tools) run through MlxChatClient with tools.

Each family gets a tokenizer folder: the tiny model's byte-level BPE tokenizer with a
chat template carrying that family's tool markers (or a ``tool_parser_type``), loaded
with ``mlx_lm.tokenizer_utils.load`` so mlx-lm chooses the parser as it does for the
real model. The output text is encoded and decoded token by token with the wrapper's
streaming detokenizer, as ``stream_generate`` hands it over, so markers arrive split
across pieces.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hermes_tui.chat.client import ChatDelta, ChatDone, ChatToolDelta
from hermes_tui.providers.mlx.chat import MlxChatClient
from hermes_tui.providers.mlx.runtime import MlxRuntime
from hermes_tui.providers.mlx.tool_calls import (
    ToolCallSplitter,
    for_chat_template,
    supports_tool_calls,
)
from hermes_tui.tools.builtin import builtin_registry

SPECS = builtin_registry().specs()

# ChatML that renders tools and calls as Qwen2.5's template does (abridged: the real one
# wraps the same pieces in more instructions). "<tool_call>" and "tool_call.name" in it
# are what mlx-lm looks for.
QWEN_TEMPLATE = (
    "{%- if tools %}<|im_start|>system\n# Tools\n<tools>"
    "{%- for tool in tools %}\n{{ tool | tojson }}{%- endfor %}\n</tools>\n"
    "For each function call, return a json object within <tool_call></tool_call> XML tags<|im_end|>\n"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'assistant' and message.tool_calls %}<|im_start|>assistant\n{{ message.content }}"
    "{%- for tool_call in message.tool_calls %}{%- set tool_call = tool_call.function %}"
    "\n<tool_call>\n{\"name\": \"{{ tool_call.name }}\", \"arguments\": {{ tool_call.arguments | tojson }}}\n</tool_call>"
    "{%- endfor %}<|im_end|>\n"
    "{%- elif message.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ message.content }}\n</tool_response><|im_end|>\n"
    "{%- else %}<|im_start|>{{ message.role }}\n{{ message.content or '' }}<|im_end|>\n{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}"
)
QWEN3_CODER_TEMPLATE = QWEN_TEMPLATE.replace(
    "For each function call", "Call a function as <tool_call>\n<function=NAME>\n<parameter=P>\nV\n</parameter>\n</function>\n</tool_call>. For each function call")
MISTRAL_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- if message.role == 'user' %}[INST]{{ message.content }}[/INST]"
    "{%- elif message.tool_calls %}[TOOL_CALLS]{{ message.tool_calls | tojson }}</s>"
    "{%- else %}{{ message.content or '' }}</s>{%- endif %}{%- endfor %}"
)
GEMMA4_TEMPLATE = (
    "{%- for message in messages %}<start_of_turn>{{ message.role }}\n{{ message.content or '' }}<end_of_turn>\n"
    "{%- endfor %}{# calls: <|tool_call>call:NAME{...}<tool_call|> #}<start_of_turn>model\n"
)
FUNCTION_GEMMA_TEMPLATE = (
    "{%- for message in messages %}<start_of_turn>{{ message.role }}\n{{ message.content or '' }}<end_of_turn>\n"
    "{%- endfor %}{# calls: <start_function_call>call:NAME{...}<end_function_call> #}<start_of_turn>model\n"
)
# Llama 3.2 renders tools, but its calls carry no markers: mlx-lm has no parser for it.
LLAMA32_TEMPLATE = (
    "{%- if tools %}Given the following functions, respond with a JSON for a function call:"
    "{%- for t in tools %}{{ t | tojson }}{%- endfor %}{%- endif %}"
    "{%- for message in messages %}<|start_header_id|>{{ message.role }}<|end_header_id|>\n\n"
    "{{ message.content or '' }}<|eot_id|>{%- endfor %}"
)
# Gemma 3's template has no tools at all.
GEMMA3_TEMPLATE = (
    "{%- for message in messages %}<start_of_turn>{{ message.role }}\n{{ message.content or '' }}<end_of_turn>\n"
    "{%- endfor %}<start_of_turn>model\n"
)


def tokenizer_folder(tiny_model, root: Path, name: str, *, template: str, parser_type: str | None = None) -> Path:
    """The tiny model's tokenizer files with ``template`` (and a tool_parser_type)."""
    folder = root / name
    folder.mkdir()
    for file in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tiny_model.fp32 / file, folder / file)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config["chat_template"] = template
    if parser_type is not None:
        config["tool_parser_type"] = parser_type
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return folder


def load_wrapper(folder: Path):
    from mlx_lm.tokenizer_utils import load

    return load(folder)


def stream_pieces(wrapper, text: str) -> list[str]:
    """``text`` as stream_generate hands it over: one decoded segment per token."""
    detokenizer = wrapper.detokenizer
    detokenizer.reset()
    pieces = []
    for token in wrapper.encode(text, add_special_tokens=False):
        detokenizer.add_token(token)
        if segment := detokenizer.last_segment:  # reading it consumes it
            pieces.append(segment)
    detokenizer.finalize()
    if segment := detokenizer.last_segment:
        pieces.append(segment)
    assert "".join(pieces) == text
    assert len(pieces) > 10  # many pieces, markers among them split
    return pieces


def split(wrapper, output: str) -> tuple[list, ToolCallSplitter]:
    splitter = ToolCallSplitter(wrapper, SPECS)
    events = []
    for piece in stream_pieces(wrapper, output):
        events += splitter.feed(piece)
    events += splitter.finish()
    return events, splitter


def call(name: str, arguments: dict) -> tuple[str, dict]:
    return name, arguments


def calls_of(splitter: ToolCallSplitter) -> list[tuple[str, dict]]:
    result = []
    for c in splitter.tool_calls:
        assert c["type"] == "function" and isinstance(c["id"], str) and c["id"]
        result.append((c["function"]["name"], json.loads(c["function"]["arguments"])))
    return result


@pytest.fixture(scope="module")
def folders(tiny_model, tmp_path_factory):
    root = tmp_path_factory.mktemp("tokenizers")
    return {
        "qwen": tokenizer_folder(tiny_model, root, "qwen", template=QWEN_TEMPLATE),
        "qwen3_coder": tokenizer_folder(tiny_model, root, "qwen3_coder", template=QWEN3_CODER_TEMPLATE),
        "mistral": tokenizer_folder(tiny_model, root, "mistral", template=MISTRAL_TEMPLATE),
        "gemma4": tokenizer_folder(tiny_model, root, "gemma4", template=GEMMA4_TEMPLATE),
        "function_gemma": tokenizer_folder(tiny_model, root, "function_gemma", template=FUNCTION_GEMMA_TEMPLATE),
        "by_config": tokenizer_folder(tiny_model, root, "by_config", template=GEMMA3_TEMPLATE, parser_type="json_tools"),
        "llama32": tokenizer_folder(tiny_model, root, "llama32", template=LLAMA32_TEMPLATE),
        "gemma3": tokenizer_folder(tiny_model, root, "gemma3", template=GEMMA3_TEMPLATE),
    }


@pytest.mark.parametrize("family, start", [
    ("qwen", "<tool_call>"), ("qwen3_coder", "<tool_call>"), ("mistral", "[TOOL_CALLS]"),
    ("gemma4", "<|tool_call>"), ("function_gemma", "<start_function_call>"), ("by_config", "<tool_call>"),
])
def test_mlx_lm_chooses_a_parser_from_the_template(folders, family, start):
    wrapper = load_wrapper(folders[family])
    assert supports_tool_calls(wrapper) and wrapper.tool_call_start == start


@pytest.mark.parametrize("family", ["llama32", "gemma3"])
def test_families_without_a_parser_have_no_tool_support(folders, family):
    assert not supports_tool_calls(load_wrapper(folders[family]))


def test_qwen25_calls_are_split_from_the_text(folders):
    wrapper = load_wrapper(folders["qwen"])
    output = (
        "I will read the file and search it.\n"
        '<tool_call>\n{"name": "read_file", "arguments": {"path": "README.md", "limit": 40}}\n</tool_call>\n'
        '<tool_call>\n{"name": "grep", "arguments": {"pattern": "TODO", "path": "src"}}\n</tool_call>'
    )
    assert not any("<tool_call>" in piece for piece in stream_pieces(wrapper, output))  # split markers
    events, splitter = split(wrapper, output)

    text = "".join(e.text for e in events if isinstance(e, ChatDelta))
    assert text == splitter.text == "I will read the file and search it.\n\n"
    assert "<tool_call>" not in text and "read_file" not in text
    assert calls_of(splitter) == [
        call("read_file", {"path": "README.md", "limit": 40}), call("grep", {"pattern": "TODO", "path": "src"})]
    tool_events = [e for e in events if isinstance(e, ChatToolDelta)]
    # a call's beginning is announced, then the parsed call follows whole
    assert [(e.index, e.name) for e in tool_events] == [(0, None), (0, "read_file"), (1, None), (1, "grep")]
    assert tool_events[1].id == splitter.tool_calls[0]["id"]
    assert json.loads(tool_events[1].arguments) == {"path": "README.md", "limit": 40}


def test_qwen3_thinking_then_a_call(folders):
    wrapper = load_wrapper(folders["qwen"])
    output = (
        "<think>\nThe user wants the tests run. I should call run_shell.\n</think>\n\n"
        '<tool_call>\n{"name": "run_shell", "arguments": {"command": "pytest -q"}}\n</tool_call>'
    )
    events, splitter = split(wrapper, output)
    assert splitter.text == "<think>\nThe user wants the tests run. I should call run_shell.\n</think>\n\n"
    assert calls_of(splitter) == [call("run_shell", {"command": "pytest -q"})]


def test_qwen3_coder_xml_calls_use_the_tool_schemas(folders):
    wrapper = load_wrapper(folders["qwen3_coder"])
    output = (
        "<tool_call>\n<function=read_file>\n<parameter=path>\nsrc/app.py\n</parameter>\n"
        "<parameter=offset>\n10\n</parameter>\n</function>\n</tool_call>"
    )
    _, splitter = split(wrapper, output)
    # "offset" is an integer in read_file's schema: the parser reads it as one
    assert calls_of(splitter) == [call("read_file", {"path": "src/app.py", "offset": 10})]
    assert splitter.text == ""


@pytest.mark.parametrize("output, expected", [
    # current Mistral models: name[ARGS]{json}, repeated, no end marker
    ('[TOOL_CALLS]read_file[ARGS]{"path": "a.py"}[TOOL_CALLS]list_dir[ARGS]{"path": "."}',
     [call("read_file", {"path": "a.py"}), call("list_dir", {"path": "."})]),
    # older ones: a JSON list, with the model's own ids
    ('[TOOL_CALLS][{"name": "grep", "arguments": {"pattern": "x"}, "id": "abc123def"}]',
     [call("grep", {"pattern": "x"})]),
])
def test_mistral_calls_run_to_the_end_of_the_reply(folders, output, expected):
    wrapper = load_wrapper(folders["mistral"])
    events, splitter = split(wrapper, output)
    assert splitter.text == "" and calls_of(splitter) == expected
    if "abc123def" in output:
        assert splitter.tool_calls[0]["id"] == "abc123def"
    assert [e.index for e in events if isinstance(e, ChatToolDelta) and e.name] == list(range(len(expected)))


def test_gemma4_calls(folders):
    wrapper = load_wrapper(folders["gemma4"])
    output = 'Reading.<|tool_call>call:read_file{path:<|"|>notes/a b.md<|"|>,limit:5}<tool_call|>'
    _, splitter = split(wrapper, output)
    assert splitter.text == "Reading."
    assert calls_of(splitter) == [call("read_file", {"path": "notes/a b.md", "limit": 5})]


def test_function_gemma_calls(folders):
    wrapper = load_wrapper(folders["function_gemma"])
    output = "<start_function_call>call:grep{pattern:<escape>def main<escape>}<end_function_call>"
    _, splitter = split(wrapper, output)
    assert calls_of(splitter) == [call("grep", {"pattern": "def main"})]


def test_a_call_cut_off_comes_back_raw_with_its_name(folders):
    wrapper = load_wrapper(folders["qwen"])
    output = 'Sure.\n<tool_call>\n{"name": "write_file", "arguments": {"path": "a.txt", "content": "hel'
    events, splitter = split(wrapper, output)
    assert splitter.text == "Sure.\n"
    (only,) = splitter.tool_calls
    assert only["function"]["name"] == "write_file"
    assert only["function"]["arguments"] == '{"name": "write_file", "arguments": {"path": "a.txt", "content": "hel'
    # the registry answers it with an error the model can correct, not an exception
    result = builtin_registry().prepare(only["function"]["name"], only["function"]["arguments"])
    assert result.is_error and "not valid JSON" in result.content


def test_an_unreadable_call_without_a_name(folders):
    wrapper = load_wrapper(folders["qwen"])
    _, splitter = split(wrapper, "<tool_call>\nread the file please\n</tool_call>Done.")
    (only,) = splitter.tool_calls
    assert only["function"] == {"name": "", "arguments": "read the file please"}
    assert splitter.text == "Done."
    assert builtin_registry().prepare("", only["function"]["arguments"]).is_error


def test_text_that_only_looks_like_a_marker_is_shown(folders):
    wrapper = load_wrapper(folders["qwen"])
    output = "Use <tool or <tool_cal to start; x < y."
    events, splitter = split(wrapper, output)
    assert splitter.text == output and splitter.tool_calls == []
    assert not any(isinstance(e, ChatToolDelta) for e in events)


def test_history_calls_render_through_the_template(folders):
    wrapper = load_wrapper(folders["qwen"])
    messages = [
        {"role": "user", "content": "Read README.md"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "README.md"}'}},
            {"id": "c2", "type": "function", "function": {"name": "grep", "arguments": "not json"}},
        ]},
        {"role": "tool", "tool_call_id": "c1", "content": "1\thello"},
    ]
    prompt = wrapper.apply_chat_template(
        for_chat_template(messages), tools=SPECS, add_generation_prompt=True, tokenize=False)
    # arguments rendered as the object, as the model wrote them (not a JSON string in a string)
    assert '{"name": "read_file", "arguments": {"path": "README.md"}}' in prompt
    assert '{"name": "grep", "arguments": "not json"}' in prompt
    assert "<tool_response>\n1\thello\n</tool_response>" in prompt
    assert '"name": "run_shell"' in prompt  # the tools themselves
    assert messages[1]["tool_calls"][0]["function"]["arguments"] == '{"path": "README.md"}'  # not changed


# -- through MlxChatClient --------------------------------------------------------


@pytest.fixture(scope="module")
def runtime():
    return MlxRuntime()


MESSAGES = [{"role": "user", "content": "List the files."}]


def test_tiny_model_without_tool_support_runs_tool_less(runtime, tiny_model):
    client = MlxChatClient(str(tiny_model.fp32), runtime=runtime)
    assert client.supports_tools is False

    events = list(client.stream(MESSAGES, max_tokens=6, tools=SPECS))

    done = events[-1]
    assert isinstance(done, ChatDone) and done.tool_calls is None
    assert all(isinstance(e, ChatDelta) for e in events[:-1])
    assert done.text == "".join(e.text for e in events[:-1])
    assert (done.usage.completion_tokens, done.usage.finish_reason) == (6, "length")
    loaded = runtime.load(str(tiny_model.fp32))
    # the tools never reached the prompt
    assert done.usage.prompt_tokens == len(runtime.prompt_tokens(loaded, MESSAGES))


def test_a_model_with_a_tool_template_gets_the_tools_in_its_prompt(runtime, tiny_model, tmp_path):
    model = tmp_path / "tiny-with-tools"
    shutil.copytree(tiny_model.fp32, model)
    config = json.loads((model / "tokenizer_config.json").read_text())
    config["chat_template"] = QWEN_TEMPLATE
    (model / "tokenizer_config.json").write_text(json.dumps(config))
    client = MlxChatClient(str(model), runtime=runtime)
    assert client.supports_tools is True
    loaded = runtime.load(str(model))
    with_tools = runtime.prompt_tokens(loaded, MESSAGES, SPECS)
    without = runtime.prompt_tokens(loaded, MESSAGES)
    assert len(with_tools) > len(without) + 100
    assert '"name": "read_file"' in loaded.tokenizer.decode(with_tools)

    done = client.complete(MESSAGES, max_tokens=6, tools=SPECS)

    assert done.usage.prompt_tokens == len(with_tools)
    # random weights write noise, not a call: the reply is text that ran to the cap
    assert done.tool_calls is None and done.usage.finish_reason == "length"
    assert done.usage.completion_tokens == 6
