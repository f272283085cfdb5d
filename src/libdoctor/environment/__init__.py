"""The target and what is installed in it: interpreter, site dirs, distributions,
RECORD, installers.
"""
