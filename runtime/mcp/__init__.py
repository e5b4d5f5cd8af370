"""MCP servers as a source of tools."""
