"""Changing an environment safely: fix plans, installer runs, backups, rollback."""
