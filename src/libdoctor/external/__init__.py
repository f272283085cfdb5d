"""The edges to the world outside the environment model: the index and its wheels over
HTTP, the installers' command lines and the child processes that run them, pip's dry run,
lock files and the system's package databases.
"""
