"""Celery entry point: `celery -A workers worker|flower` loads `workers.app`."""

from runtime.errors import ConfigurationError
from runtime.settings import get_settings
from workers.app import make_app

try:
    settings = get_settings()  # the worker's settings: its environment, read once
except ConfigurationError as error:  # one line, not Celery's traceback of the import
    raise SystemExit(f"toolrun: {error}") from None
app = make_app(settings)

__all__ = ["app", "make_app"]
