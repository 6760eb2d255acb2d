"""The small Python project the agent-task benchmark works in (``bench_agent_tasks.py``).

Generated, not carried as files, so every run starts from the same bytes in a temp
workspace. It is built to hold what broke the app on real repositories: a module whose
first line opens a bracket, a log long enough to be cut, a failing test (a one-line bug
in ``apply_discount``), an INI config, and symbols used across files (for a rename).
The tests use ``unittest`` so they run with any Python, no packages needed.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

# The facts the task checks rely on; kept next to the files that hold them.
LEDGER_FILE = "shopkit/ledger.py"
FIXTURE_ROWS = 7
LOG_ERRORS = 37
LOG_LINES = 3_000
VERSION = "0.3.1"

FILES: dict[str, str] = {
    "README.md": """\
# shopkit

A tiny shop library: carts, prices, stock ledgers and CSV reports.

Run the tests with `python -m unittest discover -s tests`.
""",
    "pyproject.toml": f"""\
[project]
name = "shopkit"
version = "{VERSION}"
requires-python = ">=3.9"
""",
    "config/app.ini": """\
[shop]
currency = EUR
max_items = 50
allow_backorder = false

[report]
delimiter = ;
""",
    "shopkit/__init__.py": '"""shopkit: carts, prices, ledgers and reports."""\n',
    "shopkit/pricing.py": '''\
"""Prices: subtotals, discounts, tax and formatting."""


def subtotal(items):
    """The sum of price * quantity over (price, quantity) pairs."""
    return sum(price * quantity for price, quantity in items)


def apply_discount(total, percent):
    """``total`` less ``percent`` per cent."""
    return total - total * percent


def add_tax(total, rate=0.2):
    """``total`` with tax at ``rate`` added."""
    return round(total * (1 + rate), 2)


def format_price(amount, currency="EUR"):
    """``amount`` with two decimals and its currency code."""
    return f"{amount:.2f} {currency}"
''',
    "shopkit/cart.py": '''\
"""A shopping cart over the pricing functions."""

from shopkit.pricing import apply_discount, subtotal


class Cart:
    def __init__(self):
        self.lines = []

    def add(self, price, quantity=1):
        if quantity < 1:
            raise ValueError("quantity must be at least 1")
        self.lines.append((price, quantity))

    def total(self, discount_percent=0):
        return apply_discount(subtotal(self.lines), discount_percent)
''',
    LEDGER_FILE: '''\
"""Stock movements, kept in order."""


class InventoryLedger:
    """Every stock movement of one shop, oldest first."""

    def __init__(self):
        self.moves = []

    def record(self, sku, change):
        self.moves.append((sku, change))

    def on_hand(self, sku):
        return sum(change for moved, change in self.moves if moved == sku)
''',
    "shopkit/report.py": '''\
"""CSV reports of carts: one row per line and a grand total."""

import csv
import io

from shopkit.pricing import format_price, subtotal


def render_report(lines, delimiter=";"):
    """A CSV text with a header, one row per (price, quantity) line, and a TOTAL row."""
    out = io.StringIO()
    writer = csv.writer(out, delimiter=delimiter)
    writer.writerow(["price", "quantity", "amount"])
    for price, quantity in lines:
        writer.writerow([price, quantity, format_price(price * quantity)])
    writer.writerow(["TOTAL", "", format_price(subtotal(lines))])
    return out.getvalue()
''',
    # The first line opens a bracket that closes lines later: what crashed the app's rows.
    "shopkit/fixtures.py": "ROWS = [\n" + "".join(
        f'    ("sku-{n}", {n * 3 + 1}, {n * 1.5:.2f}),\n' for n in range(FIXTURE_ROWS)) + "]\n",
    "tests/__init__.py": "",
    "tests/test_pricing.py": '''\
import unittest

from shopkit.pricing import add_tax, apply_discount, format_price, subtotal


class PricingTest(unittest.TestCase):
    def test_subtotal(self):
        self.assertEqual(subtotal([(2.0, 3), (1.5, 2)]), 9.0)

    def test_apply_discount(self):
        self.assertEqual(apply_discount(200.0, 10), 180.0)

    def test_add_tax(self):
        self.assertEqual(add_tax(100.0), 120.0)

    def test_format_price(self):
        self.assertEqual(format_price(3), "3.00 EUR")


if __name__ == "__main__":
    unittest.main()
''',
    "tests/test_cart.py": '''\
import unittest

from shopkit.cart import Cart


class CartTest(unittest.TestCase):
    def test_total_without_discount(self):
        cart = Cart()
        cart.add(4.0, 2)
        self.assertEqual(cart.total(), 8.0)

    def test_quantity_must_be_positive(self):
        with self.assertRaises(ValueError):
            Cart().add(1.0, 0)


if __name__ == "__main__":
    unittest.main()
''',
}


def server_log() -> str:
    """A long log: LOG_LINES lines, LOG_ERRORS of them errors, spread through it."""
    lines = []
    every = LOG_LINES // LOG_ERRORS
    for n in range(LOG_LINES):
        if n % every == every - 1:
            lines.append(f"2026-11-30T10:{n // 60 % 60:02d}:{n % 60:02d} ERROR payment gateway timeout order={n}")
        else:
            lines.append(f"2026-11-30T10:{n // 60 % 60:02d}:{n % 60:02d} INFO request served path=/cart/{n} ms={n % 97}")
    assert sum(" ERROR " in line for line in lines) == LOG_ERRORS
    return "\n".join(lines) + "\n"


def make_project(root: Path, *, git: bool = True) -> Path:
    """Write the project into ``root`` (a git repository with one commit when ``git``)."""
    for name, text in FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    (root / "logs").mkdir(exist_ok=True)
    (root / "logs" / "server.log").write_text(server_log(), encoding="utf-8")
    if git:
        env = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.invalid",
               "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.invalid",
               "HOME": str(root), "PATH": "/usr/bin:/bin"}
        for command in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-q", "-m", "shopkit"]):
            subprocess.run(command, cwd=root, env=env, check=True, capture_output=True)
    return root


def run_tests(root: Path, python: str) -> subprocess.CompletedProcess:
    """The project's tests, as its README says to run them."""
    return subprocess.run([python, "-m", "unittest", "discover", "-s", "tests"], cwd=root, capture_output=True,
                          text=True, timeout=120)
