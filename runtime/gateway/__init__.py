"""The HTTP gateway (`toolrun serve`): toolrun for orchestrators in any
language, with API keys and roles (docs/architecture.md, "The HTTP gateway")."""
