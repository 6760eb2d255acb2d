"""Screens the app pushes: chat, sessions, settings, first run, models, bench."""
