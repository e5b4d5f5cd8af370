"""Faces of toolrun for the frameworks agents are built on: MCP (`toolrun mcp
serve`), Pydantic AI's deferred tools, LangGraph's tool node. Each is a thin
module over the public `Runtime`, needs its framework's extra, and is imported
by nothing in the core (docs/architecture.md, "Integrations")."""
