"""The model of a target and what is installed in it: interpreter, site dirs, dist-info
files, RECORD, distributions and who claims which path, requirements, wheels.
"""
