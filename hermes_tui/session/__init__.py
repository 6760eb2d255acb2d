"""The turn loop: a session's turns, how a session is opened, what runs after a turn."""
