"""The chat's widgets: message views, the composer, the status bar."""
