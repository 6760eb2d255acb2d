"""Support code shared by the tests (plain modules, not tests): imported as ``support.*``."""
