"""The documentation site's build steps (mkdocs.yml names `docsgen/hooks.py`).

The reference pages are written from the code at build time, so they cannot
drift from it: settings from `runtime.settings.Settings`' fields, the CLI from
the `toolrun` command's own help, the HTTP API from the gateway's OpenAPI
document. The benchmark page's figures come from the bench JSON committed
under `docs/benchmarks/`. Not part of the installed package.
"""
