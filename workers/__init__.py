"""Celery entry point: `celery -A workers worker|flower` loads `workers.app`."""

from runtime.settings import get_settings
from workers.app import make_app

app = make_app(get_settings())  # the worker's settings: its environment, read once

__all__ = ["app", "make_app"]
