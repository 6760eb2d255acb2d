"""The compression models' measured speeds in the store (hermes_tui/store/speeds.py), on real
SQLite files: kept across a reopen, the newest measurement kept, and migration 8 on a database
of the version before it."""

from __future__ import annotations

import json
import sqlite3

import pytest

from hermes_tui.store import Store, StoreError
from hermes_tui.store.schema import SCHEMA_VERSION, migrate, user_version
from hermes_tui.store.speeds import StoredSpeed, list_speeds, load_speed, save_speed

MODEL_A = "openai-api:qwen2.5-coder-1.5b@http://127.0.0.1:8080/v1"
MODEL_B = "openai-api:qwen2.5-coder-0.5b@http://127.0.0.1:8080/v1"
SPEEDS_VERSION = 8  # the migration that adds model_speeds


def test_speeds_survive_a_reopen_of_the_store_per_model(tmp_path):
    path = tmp_path / "state.db"
    with Store(path) as store:
        save_speed(store, StoredSpeed(MODEL_A, 60.0, 16.0, 1000.0))
        save_speed(store, StoredSpeed(MODEL_B, 176.0, 48.0, 1001.0))
    with Store(path) as store:
        assert load_speed(store, MODEL_A) == StoredSpeed(MODEL_A, 60.0, 16.0, 1000.0)
        assert load_speed(store, MODEL_B) == StoredSpeed(MODEL_B, 176.0, 48.0, 1001.0)
        assert load_speed(store, "mlx:never-measured") is None
        assert [s.model for s in list_speeds(store)] == [MODEL_B, MODEL_A]  # the latest measured first


def test_an_older_measurement_never_replaces_a_newer_one(tmp_path):
    with Store(tmp_path / "state.db") as store:
        save_speed(store, StoredSpeed(MODEL_A, 60.0, 16.0, 2000.0))
        save_speed(store, StoredSpeed(MODEL_A, 30.0, 8.0, 1000.0))  # another process, measured before
        assert load_speed(store, MODEL_A) == StoredSpeed(MODEL_A, 60.0, 16.0, 2000.0)
        save_speed(store, StoredSpeed(MODEL_A, 30.0, 8.0, 3000.0))  # a timeout halved them since
        assert load_speed(store, MODEL_A) == StoredSpeed(MODEL_A, 30.0, 8.0, 3000.0)


def test_speeds_that_are_not_positive_are_refused(tmp_path):
    with Store(tmp_path / "state.db") as store:
        with pytest.raises(StoreError):
            save_speed(store, StoredSpeed(MODEL_A, 0.0, 16.0, 1000.0))
        assert load_speed(store, MODEL_A) is None


def test_migration_8_keeps_what_a_version_7_database_holds(tmp_path):
    assert SCHEMA_VERSION == SPEEDS_VERSION  # a later migration: build this test's database one version lower
    path = tmp_path / "v7.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, target=SPEEDS_VERSION - 1)
    conn.execute("INSERT INTO sessions (id, title, created, updated, kind) VALUES ('old1', 'a replay', 1.0, 2.0, 'replay')")
    conn.execute("INSERT INTO messages (id, session_id, position, role, content, created)"
                 " VALUES ('m1', 'old1', 0, 'user', 'where is the okapi', 3.0)")
    conn.execute("INSERT INTO bench_runs (model, provider, started, medians) VALUES ('m', 'mlx', 4.0, ?)",
                 (json.dumps({"prompt_tps": 170.0}),))
    conn.execute("INSERT INTO approval_rules (workspace, tool, action, created) VALUES ('/w', 'bash', 'allow', 5.0)")
    conn.close()

    with Store(path) as store:
        assert user_version(store.conn) == SCHEMA_VERSION
        info = store.get_session("old1")
        assert (info.title, info.kind) == ("a replay", "replay")
        assert [m.content for m in store.load_active("old1")] == ["where is the okapi"]
        assert [h.message_id for h in store.search("okapi")] == ["m1"]
        assert store.conn.execute("SELECT model, medians FROM bench_runs").fetchall() == [
            ("m", json.dumps({"prompt_tps": 170.0}))]
        assert store.conn.execute("SELECT workspace, tool FROM approval_rules").fetchall() == [("/w", "bash")]
        assert list_speeds(store) == []
        save_speed(store, StoredSpeed(MODEL_A, 60.0, 16.0, 1000.0))
        assert store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    with Store(path) as store:
        assert load_speed(store, MODEL_A) == StoredSpeed(MODEL_A, 60.0, 16.0, 1000.0)
