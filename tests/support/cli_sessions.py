"""A realistic agent session for the CLI tests: three user requests, the tool steps answering them."""

from __future__ import annotations

import json
from typing import Any

EXPORT_PY = '''\
import csv
import io

from app.models import Customer

HEADER = ["id", "name", "email", "created"]


def export_customers(customers: list[Customer]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(HEADER)
    for customer in customers:
        try:
            name = customer.name.encode("ascii").decode()
        except UnicodeEncodeError:
            continue  # TODO: why do we skip these?
        writer.writerow([customer.id, name, customer.email, customer.created.isoformat()])
    return out.getvalue()


def export_to_file(customers: list[Customer], path: str) -> int:
    text = export_customers(customers)
    with open(path, "w") as handle:
        handle.write(text)
    return text.count("\\n") - 1
'''

PYTEST_FAIL = '''\
============================= test session starts ==============================
collected 14 items

tests/test_export.py ......F.                                            [ 57%]
tests/test_models.py ......                                              [100%]

=================================== FAILURES ===================================
_________________________ test_export_keeps_unicode_names ______________________

    def test_export_keeps_unicode_names():
        customers = [make_customer(1, "Zoë Åkesson"), make_customer(2, "Bob")]
>       assert export_customers(customers).count("\\n") == 3
E       AssertionError: assert 2 == 3
E        +  where 2 = <built-in method count of str object>("\\n")

tests/test_export.py:41: AssertionError
=========================== short test summary info ============================
FAILED tests/test_export.py::test_export_keeps_unicode_names - AssertionError
========================= 1 failed, 13 passed in 0.41s =========================
'''

PYTEST_PASS = '''\
============================= test session starts ==============================
collected 15 items

tests/test_export.py ........                                            [ 53%]
tests/test_models.py .......                                             [100%]

============================== 15 passed in 0.38s ==============================
'''

GIT_DIFF = '''\
diff --git a/app/export.py b/app/export.py
index 3b1f2c4..9e0d7a1 100644
--- a/app/export.py
+++ b/app/export.py
@@ -11,11 +11,7 @@ def export_customers(customers: list[Customer]) -> str:
     writer = csv.writer(out)
     writer.writerow(HEADER)
     for customer in customers:
-        try:
-            name = customer.name.encode("ascii").decode()
-        except UnicodeEncodeError:
-            continue  # TODO: why do we skip these?
-        writer.writerow([customer.id, name, customer.email, customer.created.isoformat()])
+        writer.writerow([customer.id, customer.name, customer.email, customer.created.isoformat()])
     return out.getvalue()
'''

SYSTEM = "You are a careful coding agent working in the repository at /srv/app. Use the tools to read, edit and test code."
USER_1 = "The CSV export drops customers whose names are not ASCII (Zoë, Åkesson...). Fix it in app/export.py and add a test."
USER_2 = "Good. Also make sure export_to_file writes UTF-8 explicitly, and keep the header order stable."
USER_3 = "Thanks, please summarize what you changed."


class SessionBuilder:
    """Builds OpenAI messages with unique tool call ids."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self._ids = 0

    def say(self, role: str, content: str) -> SessionBuilder:
        self.messages.append({"role": role, "content": content})
        return self

    def step(self, text: str, tool: str, arguments: dict[str, Any], result: str) -> SessionBuilder:
        self._ids += 1
        call_id = f"call_{self._ids:03d}"
        self.messages.append({
            "role": "assistant",
            "content": text,
            "tool_calls": [{"id": call_id, "type": "function",
                            "function": {"name": tool, "arguments": json.dumps(arguments)}}],
        })
        self.messages.append({"role": "tool", "tool_call_id": call_id, "name": tool, "content": result})
        return self


def investigation_steps(b: SessionBuilder) -> None:
    b.step("Let me read the exporter first.", "read_file", {"path": "app/export.py"}, EXPORT_PY)
    b.step("The loop skips names that fail an ASCII encode. Let me run the export tests to see the failure.",
           "bash", {"command": "cd /srv/app && python -m pytest tests/ -q"}, PYTEST_FAIL)
    b.step("Checking where Customer.name comes from.", "bash",
           {"command": "grep -rn 'name' app/models.py"},
           "app/models.py:12:    name: str\napp/models.py:31:        self.name = unicodedata.normalize('NFC', name)\n"
           "app/models.py:44:    def display_name(self) -> str:\napp/models.py:45:        return self.name.title()\n")
    b.step("Names are already normalized to NFC, so the ASCII round-trip is the only problem. Removing it.",
           "edit_file", {"path": "app/export.py", "old": "try:\n            name = ...", "new": "customer.name"},
           "Applied 1 edit to app/export.py (5 lines removed, 1 added).")
    b.step("Here is the diff so far.", "bash", {"command": "git diff app/export.py"}, GIT_DIFF)
    b.step("Running the tests again.", "bash", {"command": "cd /srv/app && python -m pytest tests/ -q"},
           PYTEST_FAIL.replace("1 failed, 13 passed", "14 passed").replace("F", "."))


def agent_session() -> list[dict[str, Any]]:
    """Three user requests and the agent steps that answer them."""
    b = SessionBuilder().say("system", SYSTEM).say("user", USER_1)
    investigation_steps(b)
    b.say("assistant", "Fixed: non-ASCII names are exported now, and tests pass.")
    b.say("user", USER_2)
    b.step("Opening the file in UTF-8 explicitly.", "edit_file",
           {"path": "app/export.py", "old": 'open(path, "w")', "new": 'open(path, "w", encoding="utf-8", newline="")'},
           "Applied 1 edit to app/export.py (1 line changed).")
    b.step("Adding a test for the header order and the encoding.", "write_file",
           {"path": "tests/test_export_encoding.py"},
           "Wrote tests/test_export_encoding.py (31 lines).")
    b.step("Running the whole suite.", "bash", {"command": "cd /srv/app && python -m pytest tests/ -q"}, PYTEST_PASS)
    b.say("assistant", "Done: export_to_file writes UTF-8 with newline='' and HEADER order is tested.")
    b.say("user", USER_3)
    b.say("assistant", "I removed the ASCII round-trip in export_customers, opened the output file as UTF-8, "
                       "and added tests for unicode names and header order. All 15 tests pass.")
    return b.messages


def one_request_session(repeat: int = 2) -> list[dict[str, Any]]:
    """Agent work with a single user message: many steps, one user turn."""
    b = SessionBuilder().say("system", SYSTEM).say("user", USER_1)
    for _ in range(repeat):
        investigation_steps(b)
    b.say("assistant", "Fixed: non-ASCII names are exported now, and tests pass.")
    return b.messages
