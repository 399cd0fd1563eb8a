"""Frontends turn external descriptions (trace files, scenarios) into RegisterPrograms."""
