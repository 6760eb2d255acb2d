"""The one rule for control characters in outside text shown in a terminal."""

from __future__ import annotations

from hermes_tui.util.terminal_text import visible_controls


def test_plain_text_newlines_and_tabs_are_kept_as_they_are():
    text = "x = [1,\n\tfoo  [bold]x[/]\nnaïve 日本 עברית\u200f"
    assert visible_controls(text) is text


def test_escape_sequences_show_as_text_never_as_escapes():
    osc52 = "\x1b]52;c;aGVsbG8=\x07"
    shown = visible_controls(f"a{osc52}b\x1b[2J\x1b[Hc\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\")
    assert "\x1b" not in shown and "\x07" not in shown
    assert shown == "a␛]52;c;aGVsbG8=␇b␛[2J␛[Hc␛]8;;http://x␛\\link␛]8;;␛\\"


def test_other_c0_del_and_c1_controls_are_shown():
    assert visible_controls("\x00\x08\x0b\x0c\x7f") == "␀␈␋␌␡"
    assert visible_controls("a\x9b31mb\x85c") == "a\\x9b31mb\\x85c"


def test_a_line_ending_is_a_newline_and_a_lone_carriage_return_is_shown():
    assert visible_controls("one\r\ntwo\r\n") == "one\ntwo\n"
    assert visible_controls("safe\rrm -rf ~") == "safe␍rm -rf ~"


def test_bidi_overrides_and_isolates_are_shown():
    assert visible_controls("ls \u202eexe.txt") == "ls ⟨U+202E⟩exe.txt"
    assert visible_controls("\u2066a\u2069") == "⟨U+2066⟩a⟨U+2069⟩"
