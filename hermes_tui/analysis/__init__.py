"""Offline work: replaying transcripts, benchmarks, fidelity probes, the telemetry report."""
