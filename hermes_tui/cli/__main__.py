"""``python -m hermes_tui.cli``: the same as the ``hermes-tui`` command."""

from hermes_tui.cli.main import main

raise SystemExit(main())
