"""Loading tools takes the MCP servers file it is given: the settings a
`Runtime` or a worker was built from, never the process's environment."""

from __future__ import annotations

import pytest

from runtime.errors import ConfigurationError
from runtime.settings import get_settings
from runtime.tools.loading import load_tools


def test_the_environments_servers_file_is_not_read_behind_the_callers_back(monkeypatch, tmp_path):
    missing = tmp_path / "servers.json"
    monkeypatch.setenv("TOOLRUN_MCP_SERVERS_FILE", str(missing))
    get_settings.cache_clear()
    try:
        assert load_tools(["tests.support.tools"]).get("echo") is not None
        with pytest.raises(ConfigurationError, match="servers.json"):
            load_tools(mcp_servers_file=get_settings().mcp_servers_file)
    finally:
        monkeypatch.delenv("TOOLRUN_MCP_SERVERS_FILE")
        get_settings.cache_clear()
