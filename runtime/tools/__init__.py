"""The built-in tools. Importing this package registers all of them.

- files: `read_file`, `list_dir` (files_read), `search_files` (files_search),
  `write_file`, `edit_file` (files_write)
- cache: `delete_cache`
- shell: `shell`
- http: `http_get`

`loading` gathers every source of tools into the registry: these built-ins, tool
modules, entry points and MCP servers.
"""

from runtime.tools import cache, files_read, files_search, files_write, http, shell

__all__ = ["cache", "files_read", "files_search", "files_write", "http", "shell"]
