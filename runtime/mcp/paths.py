"""Which arguments of an MCP tool name files: its path-like arguments.

The permission gate treats them as it treats a built-in file tool's `path`
(docs/architecture.md, the permission gate): each must resolve inside the
batch's workspace, symlinks followed, and a rule's specifier is a glob over
them (`fs__read_text_file(.env)`, `fs__write_file(*.txt)`). This holds for
trusted and untrusted servers alike: a server's own confinement (its roots) is
a second line, not the first.

An argument is path-like by its name (`path`, `paths`, `source`, `destination`,
`uri`, `file`, `directory`, and names ending in one of them, such as
`file_path` or `targetDir`) or by its schema (`format: uri`), when its value is
a string or a list of strings.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel

NAMES = {
    "path",
    "paths",
    "source",
    "sources",
    "destination",
    "src",
    "dst",
    "dest",
    "target",
    "uri",
    "uris",
    "url_path",
    "file",
    "files",
    "filename",
    "filenames",
    "directory",
    "directories",
    "dir",
    "dirs",
    "folder",
    "root",
    "cwd",
}
SUFFIXES = ("path", "paths", "file", "files", "dir", "directory", "folder", "filename", "uri")
URI_FORMATS = {"uri", "uri-reference", "iri", "iri-reference"}
_WORDS = re.compile(r"[^a-z0-9]")


def path_fields(model: type[BaseModel], schema: Any) -> tuple[str, ...]:
    """The model's field names (as pydantic knows them) of path-like arguments."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict):
        return ()
    by_alias = {info.alias or name: name for name, info in model.model_fields.items()}
    found = []
    for prop, subschema in properties.items():
        subschema = subschema if isinstance(subschema, dict) else {}
        if prop in by_alias and _strings(subschema) and _path_like(prop, subschema):
            found.append(by_alias[prop])
    return tuple(found)


def _path_like(prop: str, subschema: dict[str, Any]) -> bool:
    items = subschema.get("items") if isinstance(subschema.get("items"), dict) else {}
    if subschema.get("format") in URI_FORMATS or items.get("format") in URI_FORMATS:
        return True
    word = _WORDS.sub("", prop.lower())
    return prop.lower() in NAMES or word in NAMES or word.endswith(SUFFIXES)


def _strings(subschema: dict[str, Any]) -> bool:
    """A string, a list of strings, or a schema that does not say (fail closed)."""
    kind = subschema.get("type")
    if kind is None or kind == "string":
        return True
    if kind == "array":
        items = subschema.get("items")
        return not isinstance(items, dict) or items.get("type") in (None, "string")
    return isinstance(kind, list) and ("string" in kind or "array" in kind)
