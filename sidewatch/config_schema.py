"""config.yaml, read and loaded. The shell reads the YAML and the token files it names
(`read_config_file`, `read_token_files`); the pure `load_config` makes the frozen `Config` of
them, or raises one `ConfigError` listing every problem, worded from pydantic's own errors
(their `type`, `loc` and `ctx`) by `WORDS` and the key's accepted form (its `description`).
pydantic is imported only when there is a file to parse (`config_models`): it would cost
`--help` most of its start. `json_schema` is what `check-config --schema` prints."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from sidewatch.config import (
    ENV_DB_URL,
    ENV_NATS_URL,
    ENV_REF_KEY,
    ENV_SERVER,
    ENV_TOKENS,
    Config,
)
from sidewatch.errors import ConfigError

if TYPE_CHECKING:
    from pydantic import BaseModel
    from pydantic.fields import FieldInfo

# How pydantic's error of each type is said. A key with a description (the form its value must
# take) says "must be {form}" for every other type, and "required, {form}" when missing; the
# checks of sidewatch's own (type `sidewatch`) say their own words; the rest are pydantic's.
WORDS = {
    "missing": "required",
    "extra_forbidden": "unknown key (known: {known})",
    "model_type": "must be a mapping",
    "bool_type": "must be true or false",
    "literal_error": "must be {expected}",  # 'plain' or 'keyed': unquoted
    "enum": "must be {expected}",
}


def load_config(
    data: Mapping[str, Any] | None,
    env: Mapping[str, str],
    source: str = "config",
    files: Mapping[str, str | None] | None = None,
) -> Config:
    """The frozen config from parsed YAML (None: no file), the environment, and the contents of
    the token files it names (`files`: path -> content, None when unreadable; read by the
    shell with `read_token_files`)."""
    if data is None and not any(
        env.get(v) for v in (ENV_DB_URL, ENV_REF_KEY, ENV_NATS_URL, *ENV_TOKENS, *ENV_SERVER)
    ):
        return Config()  # nothing to parse: the defaults (a test holds them equal to parse's)
    return parse(data, env, source, files or {})


def parse(
    data: Mapping[str, Any] | None,
    env: Mapping[str, str],
    source: str,
    files: Mapping[str, str | None],
) -> Config:
    """The `Config` of a parsed file, through the models (see `load_config`)."""
    from pydantic import ValidationError  # noqa: PLC0415 (pydantic: only to parse a file)

    from sidewatch.config_models import ConfigFile  # noqa: PLC0415 (as pydantic)
    from sidewatch.config_rules import agreement  # noqa: PLC0415 (as pydantic)
    from sidewatch.config_values import Given  # noqa: PLC0415 (as pydantic)

    data = data or {}
    if not isinstance(data, Mapping):
        raise ConfigError(["the file must hold a mapping at its top level"], source)
    nats = data.get("nats")
    if env.get(ENV_NATS_URL) and (isinstance(nats, Mapping) or not nats):
        data = {**data, "nats": {**(nats or {}), "url": env[ENV_NATS_URL]}}
    data = with_server_env(data, env)
    given = Given(env, files)
    try:
        parsed = ConfigFile.model_validate(data)
        errors: list[Any] = []
    except ValidationError as e:
        errors = _own(e.errors())
    found: list[tuple[tuple[float, ...], str]] = []
    for err in errors:
        shown, rank, field, parent = _place(err["loc"], ConfigFile)
        found.append((rank, f"{_path(shown, data)}: {_words(err, field, parent)}"))
    for p in agreement(data, given):
        shown, rank, _, _ = _place(p.rank or p.loc, ConfigFile)
        found.append((rank, f"{p.shown or _path(p.loc, data)}: {p.text}"))
    if found:
        lines = [line for _, line in sorted(found, key=lambda f: f[0])]
        raise ConfigError(list(dict.fromkeys(lines)), source)  # a list's items: said once
    return Config(**parsed.record(given))


_FLAGS = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}


def with_server_env(data: Mapping[str, Any], env: Mapping[str, str]) -> Mapping[str, Any]:
    """The file's `server` section with the keys the environment sets (`ENV_SERVER`) over it;
    a flag's `true`/`false` (`yes`/`no`, `1`/`0`) read as YAML's, anything else left for the
    models to refuse."""
    server = data.get("server")
    if not any(env.get(v) for v in ENV_SERVER) or not (server is None or isinstance(server, dict)):
        return data
    out: dict[str, Any] = dict(server or {})
    for var, path in ENV_SERVER.items():
        if not (value := env.get(var)):
            continue
        section = out
        for key in path[:-1]:
            inner = section.get(key)
            section[key] = dict(inner) if isinstance(inner, dict) else {}
            section = section[key]
        flag = path[-1] in ("allowPlaintext", "protectMetrics")
        section[path[-1]] = _FLAGS.get(value.strip().lower(), value) if flag else value
    return {**data, "server": out}


def _own(errors: list[Any]) -> list[Any]:
    """The errors but a list's "too short" where its items failed: pydantic counts only the
    items that passed, and the items' problems are the list's only ones."""
    inside = [tuple(e["loc"]) for e in errors]
    return [
        e
        for e in errors
        if e["type"] != "too_short"
        or not any(len(loc) > len(e["loc"]) and loc[: len(e["loc"])] == e["loc"] for loc in inside)
    ]


def _place(
    loc: Sequence[Any], root: type[BaseModel]
) -> tuple[tuple[Any, ...], tuple[float, ...], FieldInfo | None, type[BaseModel]]:
    """Where an error is: its key path (`loc` up to the key whose value it is in: a list of
    values is one key), where it is listed (each key in its mapping's order, unknown keys
    first), the key's field, and the mapping the key is of."""
    model: type[BaseModel] | None = root
    parent, field, items = root, None, False
    shown: list[Any] = []
    rank: list[float] = []
    for step in loc:
        if isinstance(step, float) or (items and isinstance(step, int)):
            shown += [step] if isinstance(step, int) else []
            rank.append(step)
            field, items = None, False  # an item of a list of mappings: a mapping
            continue
        if model is None or not isinstance(step, str):
            break  # inside the key's value
        keys = list(_keys(model))
        shown.append(step)
        parent, field = model, None
        if step not in keys:
            rank.append(-1)  # an unknown key: first, by its mapping
            break
        rank.append(keys.index(step))
        field = model.model_fields[_keys(model)[step]]
        model, items = _inner(field.annotation)
    return tuple(shown), tuple(rank), field, parent


def _keys(model: type[BaseModel]) -> dict[str, str]:
    """A mapping's keys as the file spells them (aliases), in order, and their fields' names."""
    return {f.alias or name: name for name, f in model.model_fields.items()}


def _inner(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """The mapping a key's value is (or is a list of: True), if any."""
    from pydantic import BaseModel  # noqa: PLC0415 (as pydantic)

    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        return annotation, False
    for arg in typing.get_args(annotation):
        model, _ = _inner(arg)
        if model is not None:
            return model, typing.get_origin(annotation) in (tuple, list)
    return None, False


def _words(err: Any, field: FieldInfo | None, parent: type[BaseModel]) -> str:
    """An error as sidewatch says it: see `WORDS`."""
    kind, form = err["type"], field and field.description
    if kind == "sidewatch":
        return str(err["msg"])
    if kind == "extra_forbidden":
        return WORDS[kind].format(known=", ".join(sorted(_keys(parent))))
    if kind == "missing":
        return f"required, {form}" if form else WORDS[kind]
    if form:
        return f"must be {form}"
    ctx = {k: str(v).replace("'", "") for k, v in (err.get("ctx") or {}).items()}
    return WORDS[kind].format(**ctx) if kind in WORDS else str(err["msg"])


def _path(loc: Sequence[Any], data: Mapping[str, Any]) -> str:
    """A key path as the file is read (`server.tokens[0].kinds`), a policy named beside its
    index."""
    path = ""
    for n, key in enumerate(loc):
        path += f"[{key}]" if isinstance(key, int) and n else f".{key}" if n else str(key)
        if n == 1 and loc[0] == "policies" and tuple(loc[2:3]) != ("name",):
            item = data["policies"][key]
            if isinstance(item, Mapping):
                name = item.get("name")
                path += f" ({name if isinstance(name, str) and name else f'policy-{key}'})"
    return path


def read_token_files(data: Mapping[str, Any] | None) -> dict[str, str | None]:
    """The contents of every `tokenFile` the parsed config names (None: unreadable)."""
    out: dict[str, str | None] = {}
    server = data.get("server") if isinstance(data, Mapping) else None
    tokens = server.get("tokens") if isinstance(server, Mapping) else None
    for item in tokens if isinstance(tokens, list) else []:
        path = item.get("tokenFile") if isinstance(item, Mapping) else None
        if isinstance(path, str):
            try:
                out[path] = Path(path).read_text(encoding="utf-8")
            except OSError:
                out[path] = None
    return out


def read_config_file(path: str | None) -> Mapping[str, Any] | None:
    """The parsed YAML of `path` (None: no file). Raises ConfigError when unreadable."""
    if path is None:
        return None
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError([f"cannot read: {e.strerror or e}"], source=path) from e
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError([f"not valid YAML: {e}".replace("\n", " ")], source=path) from e
    if data is not None and not isinstance(data, Mapping):
        raise ConfigError(["the file must hold a mapping at its top level"], source=path)
    return data


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of config.yaml, for editors."""
    from pydantic.json_schema import GenerateJsonSchema  # noqa: PLC0415 (as pydantic)

    from sidewatch.config_models import ConfigFile  # noqa: PLC0415 (as pydantic)

    class Untitled(GenerateJsonSchema):
        def field_title_should_be_set(self, schema: Any) -> bool:
            return False  # a key's title would only repeat the key

    schema = ConfigFile.model_json_schema(by_alias=True, schema_generator=Untitled)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}
