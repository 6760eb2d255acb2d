"""hermes-tui: a local-first terminal chat app whose context never fills up."""

__version__ = "0.1.0"
