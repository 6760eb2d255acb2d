"""The OS sandbox under every command a tool runs (``run_shell``, ripgrep for ``grep``).

One direction of imports (pyproject ``[tool.importlinter]``):

- ``policy``: the one decision, what each approval mode lets a command read, write and
  connect to (a plain ``Policy``);
- ``landlock`` (Linux: Landlock and a seccomp socket filter, by ctypes) and ``seatbelt``
  (macOS: a ``sandbox-exec`` profile): how a ``Policy`` is enforced;
- ``launch``: the small launcher a command runs through on Linux
  (``python -I -c ... POLICY -- bash -c CMD``): it confines itself, then execs;
- ``support``: what the tools and the app use: ``available()`` (is there a sandbox here,
  and why not) and ``Sandbox`` (one session's: its private temp dir, and the argv and
  environment a command runs with in the current mode).

Nothing here is imported by the launcher but ``launch`` and ``landlock``: a command's
start pays for those two only.
"""
