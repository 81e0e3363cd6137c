"""Proctor's HTTP service: app factory, routes, settings, dispatch and the `proctor` command."""
