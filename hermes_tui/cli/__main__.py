"""``python -m hermes_tui.cli``: the same as the ``hermes-tui`` command."""

from hermes_tui.cli.root import main

raise SystemExit(main())
