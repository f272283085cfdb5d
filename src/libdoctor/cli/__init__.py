"""The command line: parse, call the core, render, choose the exit code."""
