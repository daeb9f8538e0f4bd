"""A renderer of the Kustomize subset deploy/kubernetes uses, for CI machines without
kustomize (neither pip nor Debian ships it; kubectl's is a binary download): `resources`
(files, and folders with a kustomization.yaml), `labels` (metadata only), `images`,
`replicas` and `patches` as JSON 6902 operations with a `target`. A field outside that subset
is an error, never silently ignored, so a manifest that needs more fails its test here first.
`kubectl kustomize` renders the same objects (docs/operating/kubernetes.md says how that was
checked)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

Obj = dict[str, Any]
KNOWN = {"apiVersion", "kind", "resources", "labels", "images", "replicas", "patches"}


def render(folder: Path) -> list[Obj]:
    """Every object the kustomization in `folder` renders."""
    kust = yaml.safe_load((folder / "kustomization.yaml").read_text())
    unknown = set(kust) - KNOWN
    if unknown:
        raise ValueError(f"{folder}: kustomization fields outside the subset: {sorted(unknown)}")
    objects: list[Obj] = []
    for entry in kust.get("resources", []):
        path = (folder / entry).resolve()
        if path.is_dir():
            objects += render(path)
        else:
            objects += [d for d in yaml.safe_load_all(path.read_text()) if d]
    for label in kust.get("labels", []):
        if label.get("includeSelectors") or label.get("includeTemplates"):
            raise ValueError(f"{folder}: labels only on metadata in this subset")
        for obj in objects:
            obj.setdefault("metadata", {}).setdefault("labels", {}).update(label["pairs"])
    for image in kust.get("images", []):
        for obj in objects:
            for container in _containers(obj):
                name, _, _ = container["image"].partition(":")
                if name == image["name"]:
                    new = image.get("newName", name)
                    container["image"] = f"{new}:{image['newTag']}" if "newTag" in image else new
    for replicas in kust.get("replicas", []):
        for obj in objects:
            if obj["kind"] == "Deployment" and obj["metadata"]["name"] == replicas["name"]:
                obj["spec"]["replicas"] = replicas["count"]
    for patch in kust.get("patches", []):
        ops = yaml.safe_load(patch["patch"])
        hit = [o for o in objects if _targeted(o, patch["target"])]
        if not hit:
            raise ValueError(f"{folder}: a patch matches nothing: {patch['target']}")
        for obj in hit:
            for op in ops:
                _apply(obj, op)
    return objects


def _containers(obj: Obj) -> list[Obj]:
    spec = obj.get("spec", {}).get("template", {}).get("spec", {})
    return [*spec.get("initContainers", []), *spec.get("containers", [])]


def _targeted(obj: Obj, target: Obj) -> bool:
    group, _, version = obj["apiVersion"].rpartition("/")
    have = {
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
        "group": group,
        "version": version,
    }
    return all(have[k] == v for k, v in target.items())


def _apply(obj: Obj, op: Obj) -> None:
    """One JSON Patch (RFC 6902) operation: add, replace or remove."""
    *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
    node: Any = obj
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if op["op"] == "remove":
        del node[int(last) if isinstance(node, list) else last]
    elif op["op"] in ("add", "replace") and isinstance(node, list):
        index = len(node) if last == "-" else int(last)
        if op["op"] == "add":
            node.insert(index, copy.deepcopy(op["value"]))
        else:
            node[index] = copy.deepcopy(op["value"])
    elif op["op"] == "add" or (op["op"] == "replace" and last in node):
        node[last] = copy.deepcopy(op["value"])
    else:
        raise ValueError(f"unsupported or failing patch operation: {op}")
