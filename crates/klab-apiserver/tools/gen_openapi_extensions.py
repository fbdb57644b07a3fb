#!/usr/bin/env python3
"""Generates klab-apiserver's table of upstream OpenAPI field extensions (src/openapi_fields.jsonl).

k8s-openapi's schemas (what the OpenAPI documents are built from) carry upstream's types and
documentation but not two things a real API server's OpenAPI has:

* `enum` on string fields whose Go type is marked `+enum` (restartPolicy, dnsPolicy,
  imagePullPolicy, service type, toleration operator/effect, ...), with the
  "Possible enum values:" section upstream's generator appends to their description. kubectl
  1.30+ `explain` prints them (`ENUM:` / `enum:` lines).
* the list and patch extensions (`x-kubernetes-patch-strategy`, `x-kubernetes-patch-merge-key`,
  `x-kubernetes-list-type`, `x-kubernetes-list-map-keys`, `x-kubernetes-map-type`), which
  kubectl's client-side apply reads from `/openapi/v2` to compute strategic merge patches.

Both are taken from packages generated from upstream's v1.33 OpenAPI:
  * enums: the npm package kubernetes-models@4.5.1 (TypeScript models of v1.33: enum fields are
    string unions, descriptions keep upstream's "Possible enum values" section);
  * extensions: the PyPI package kubernetes-validate (its v1.33.0-local/_definitions.json).

Usage (from the repository root):
    npm pack kubernetes-models@4.5.1 && tar xzf kubernetes-models-4.5.1.tgz   # -> package/
    pip download --no-deps kubernetes-validate==1.37.0 && unzip kubernetes_validate-*.whl -d kv
    python3 crates/klab-apiserver/tools/gen_openapi_extensions.py package \
        kv/kubernetes_validate/kubernetes-json-schema/v1.33.0-local/_definitions.json \
        > crates/klab-apiserver/src/openapi_fields.jsonl

Output: one JSON object per line, ordered by definition then property:
    {"def": "io.k8s.api.core.v1.PodSpec", "prop": "restartPolicy",
     "enum": ["Always", "Never", "OnFailure"], "enumDoc": "Possible enum values:\\n - ...",
     "ext": {"x-kubernetes-...": ...}}
("enum"/"enumDoc" and "ext" each only where upstream has them.)
"""

import json
import os
import re
import sys

EXTENSIONS = (
    "x-kubernetes-list-map-keys",
    "x-kubernetes-list-type",
    "x-kubernetes-map-type",
    "x-kubernetes-patch-merge-key",
    "x-kubernetes-patch-strategy",
)

# Groups whose definitions are under io.k8s.api.<first label of the group>.
SKIP_DIRS = {"apiextensions.k8s.io", "apiregistration.k8s.io", "_schemas"}


def definition_prefix(rel_dir):
    """`v1` -> io.k8s.api.core.v1, `apps/v1` -> io.k8s.api.apps.v1,
    `rbac.authorization.k8s.io/v1` -> io.k8s.api.rbac.v1."""
    parts = rel_dir.split(os.sep)
    if len(parts) == 1:
        return "io.k8s.api.core." + parts[0]
    group, version = parts[0], parts[1]
    return "io.k8s.api.%s.%s" % (group.split(".")[0], version)


INTERFACE = re.compile(r"export interface I(\w+)(?: extends [^{]*)? \{\n(.*?)\n\}", re.S)
PROPERTY = re.compile(r"/\*\*\n(.*?)\*/\n\s*\"(\w+)\"\??: ([^;]*);", re.S)


def jsdoc_lines(block):
    out = []
    for line in block.split("\n"):
        line = line.strip()
        if not line.startswith("*"):
            continue
        line = line[1:]
        if line.startswith(" "):
            line = line[1:]
        out.append(line)
    return out


def enums(models_dir):
    found = {}
    for root, _, files in os.walk(models_dir):
        rel = os.path.relpath(root, models_dir)
        if rel == "." or rel.split(os.sep)[0] in SKIP_DIRS:
            continue
        for f in files:
            if not f.endswith(".d.ts") or f == "index.d.ts":
                continue
            text = open(os.path.join(root, f), encoding="utf-8").read()
            m = INTERFACE.search(text)
            if not m:
                continue
            name = definition_prefix(rel) + "." + m.group(1)
            for pm in PROPERTY.finditer(m.group(2)):
                doc, prop, ty = pm.group(1), pm.group(2), pm.group(3)
                lines = jsdoc_lines(doc)
                try:
                    start = lines.index("Possible enum values:")
                except ValueError:
                    continue
                values = json.loads("[" + ty.replace(" | ", ", ") + "]")
                found[(name, prop)] = (values, "\n".join(lines[start:]).rstrip("\n"))
    return found


def extensions(definitions_path):
    defs = json.load(open(definitions_path, encoding="utf-8"))["$defs"]
    found = {}
    for name, schema in defs.items():
        for prop, ps in (schema.get("properties") or {}).items():
            ext = {k: ps[k] for k in EXTENSIONS if k in ps}
            if ext:
                found[(name, prop)] = ext
    return found, set(defs)


def main():
    models_dir, definitions_path = sys.argv[1], sys.argv[2]
    ext, known = extensions(definitions_path)
    en = enums(models_dir)
    missing = sorted(k for k in en if k[0] not in known)
    if missing:
        sys.exit("definitions not in upstream's list: %r" % missing[:5])
    for key in sorted(set(ext) | set(en)):
        row = {"def": key[0], "prop": key[1]}
        if key in en:
            row["enum"], row["enumDoc"] = en[key]
        if key in ext:
            row["ext"] = ext[key]
        print(json.dumps(row, ensure_ascii=False, sort_keys=False))


if __name__ == "__main__":
    main()
