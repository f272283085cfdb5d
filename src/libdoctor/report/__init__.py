"""Renderers: each turns a report into a string; only the CLI prints."""
