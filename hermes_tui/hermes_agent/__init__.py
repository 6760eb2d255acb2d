"""Interop with Hermes Agent (a separate program, whose home is ``$HERMES_HOME``): its
compression settings offered as ours (``config``), its messages read as our transcript
(``sessions``), its ``state.db`` read strictly read-only (``state_db``) and its sessions
imported as new sessions of ours (``importer``). Nothing here writes into Hermes' home.

Recognising Hermes' summary markers stays in ``compaction.hermes_markers``: it is part of
reading any marker, and compaction sits below this package."""
