"""Celery entry point: `celery -A workers worker|flower` loads `workers.app`."""

from workers.app import make_app

app = make_app()

__all__ = ["app", "make_app"]
