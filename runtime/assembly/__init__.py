"""Where a process of the cluster is put together from its settings: the
client's `Runtime`, each worker process and the gateway build their transport
and their batch mover here, once (docs/architecture.md, "Assembly")."""
