#!/usr/bin/env python3
"""Generates klab-apiserver's protobuf message table (src/protobuf/messages.txt).

The Kubernetes protobuf wire format is defined by upstream's generated.proto files. The k8s-pb
crate carries them as prost types (field numbers and wire types, snake_case names); k8s-openapi
carries the JSON field names, the required lists and the documentation. This script joins the two
into one line-based table that the API server's generic codec reads at start-up, so no message
has a hand-written codec and a new kind needs no code.

Usage (from the repository root, with both crates in the cargo registry; k8s-pb is no
dependency of the workspace: `cargo info k8s-pb@0.9.0` downloads it there):
    python3 crates/klab-apiserver/tools/gen_proto_table.py \
        ~/.cargo/registry/src/*/k8s-pb-0.9.0 ~/.cargo/registry/src/*/k8s-openapi-0.29.0 \
        > crates/klab-apiserver/src/protobuf/messages.txt

Table format (one message, then its fields, ordered by name then number):
    M <full proto name>
    F <number> <json name> <kind> [<type>] [flags]
kind: string bool int32 int64 double bytes message map-string map-bytes map-message
flags: i (inline: an embedded struct whose fields JSON flattens into the parent), r (repeated), q (required in the JSON schema), z (zero is meaningful: the documentation
gives a non-zero default or a meaning to zero, so the field is a Go pointer whose explicit zero
must survive a decode; other zero scalars are what Go's marshaller writes for unset fields).
"""

import os
import re
import sys

# Which packages are served (or about to be): stable groups and the apimachinery types they use.
PACKAGES = re.compile(
    r"^k8s\.io\.(api\.(core|apps|batch|coordination|discovery|events|policy|scheduling|storage|"
    r"autoscaling|authentication|authorization|rbac|networking|node)\.v1|"
    r"apimachinery\.pkg\..*|metrics\.pkg\.apis\.metrics\.v1beta1)$"
)

FIELD = re.compile(
    r"#\[prost\(([^\]]*?)\)\]\s*pub\s+(?:r#)?(\w+)\s*:\s*(.*?),\s*(?=#\[prost|\Z)", re.S
)
RUST_STR = r'"((?:[^"\\]|\\.)*)"'


def module_of(root, path):
    rel = os.path.relpath(os.path.dirname(path), os.path.join(root, "src"))
    return [] if rel == "." else rel.split(os.sep)


def resolve(module, ty):
    """Resolves a Rust type path (relative to `module`) to a proto full name."""
    ty = ty.strip().rstrip(",").strip()
    parts = ty.split("::")
    mod = list(module)
    while parts and parts[0] == "super":
        mod.pop()
        parts.pop(0)
    return "k8s.io." + ".".join(mod + parts)


def inner(ty, wrapper):
    m = re.search(wrapper + r"\s*<(.*)>\s*$", ty.strip(), re.S)
    return m.group(1).strip() if m else ty.strip()


def parse_pb(root):
    messages = {}
    for dirpath, _, files in os.walk(os.path.join(root, "src")):
        for f in files:
            if f != "mod.rs":
                continue
            path = os.path.join(dirpath, f)
            module = module_of(root, path)
            text = open(path).read()
            text = "\n".join(l for l in text.split("\n") if not l.strip().startswith("//"))
            for m in re.finditer(r"pub struct (\w+) \{(.*?)\n\}", text, re.S):
                name = "k8s.io." + ".".join(module + [m.group(1)])
                fields = []
                for fm in FIELD.finditer(m.group(2) + "\n"):
                    attr, fname, ty = fm.group(1), fm.group(2), " ".join(fm.group(3).split())
                    tag = int(re.search(r'tag\s*=\s*"(\d+)"', attr).group(1))
                    repeated = "repeated" in [p.strip() for p in attr.split(",")]
                    mm = re.match(r'btree_map\s*=\s*"string,\s*(\w+)"', attr)
                    if mm:
                        kind = "map-" + mm.group(1)
                        target = ""
                        if mm.group(1) == "message":
                            vt = inner(ty, "BTreeMap")
                            vt = vt.split(",", 1)[1]
                            target = resolve(module, vt)
                        fields.append((tag, fname, kind, target, False))
                        continue
                    kind = attr.split(",")[0].strip()
                    if kind.startswith("bytes"):
                        kind = "bytes"
                    target = ""
                    if kind == "message":
                        t = inner(inner(inner(ty, "Option"), "Vec"), "Box")
                        target = resolve(module, t)
                    fields.append((tag, fname, kind, target, repeated))
                messages[name] = fields
    return messages


def parse_openapi(root):
    """schema name → (json names, required, descriptions) from k8s-openapi's v1_33 sources."""
    out = {}
    base = os.path.join(root, "src", "v1_33")
    for dirpath, _, files in os.walk(base):
        for f in files:
            if not f.endswith(".rs"):
                continue
            text = open(os.path.join(dirpath, f)).read()
            for im in re.finditer(
                r"impl crate::schemars::JsonSchema for \w+ \{\s*fn schema_name\(\)[^{]*\{\s*"
                + RUST_STR
                + r"\.into\(\)",
                text,
            ):
                schema = im.group(1)
                body = text[im.end():]
                end = body.find("\nimpl ")
                body = body if end < 0 else body[:end]
                names = re.findall(r'^\s*' + RUST_STR + r' => Field::Key_\w+,', text, re.M)
                required = []
                rm = re.search(r'"required": \[(.*?)\]', body, re.S)
                if rm:
                    required = re.findall(RUST_STR, rm.group(1))
                desc = {}
                for n in names:
                    pm = re.search(
                        r'\n\s*"' + re.escape(n) + r'": \(?\{.*?"description"(?:\.into\(\), |: )' + RUST_STR,
                        body,
                        re.S,
                    )
                    if pm:
                        desc[n] = pm.group(1)
                out[schema] = (names, required, desc)
    return out


def norm(s):
    return s.replace("_", "").lower()


def camel(snake):
    parts = snake.split("_")
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])


NONZERO_DEFAULT = re.compile(
    r"\b[Dd]efaults? (?:to|is|value is)\s+(?!0\b|0s\b|false\b|zero\b|nil\b|empty\b|unset\b|none\b|\"\")",
)


# An integer whose documentation gives zero a meaning of its own ("The value zero indicates delete
# immediately", "Zero and negative values will be treated as 0") is a pointer in Go.
ZERO_MEANS = re.compile(r"\b(?:[Zz]ero\b|(?:value|to|as|of|is|be) 0\b(?! *<))")
# Documentation that speaks of the field being nil or unset describes a Go pointer.
NIL_MEANS = re.compile(r"\b(?:nil|[Nn]ull)\b")
ZERO_DEFAULT = re.compile(r"\b[Dd]efaults? (?:to|is) (?:0|zero)\b")


def inline(pb, oa, target, parent_names):
    """Whether `target`'s fields appear in the parent's JSON (mostly: the parent's schema may be
    older than the message): the sign of a Go struct embedded inline, not a newer field."""
    tnames, _, _ = oa.get("io.k8s." + target[len("k8s.io."):], ([], [], {}))
    if not tnames:
        tnames = [camel(f[1]) for f in pb.get(target, [])]
    hits = sum(1 for n in tnames if n in parent_names)
    return hits > 0 and hits * 2 >= len(tnames)


def main():
    pb = parse_pb(sys.argv[1])
    oa = parse_openapi(sys.argv[2])
    print("# Generated by crates/klab-apiserver/tools/gen_proto_table.py from k8s-pb 0.9.0 (field")
    print("# numbers) and k8s-openapi 0.29.0 v1_33 (JSON names, required fields, documentation).")
    for name in sorted(pb):
        pkg = name.rsplit(".", 1)[0]
        if not PACKAGES.match(pkg):
            continue
        schema = "io.k8s." + name[len("k8s.io."):]
        names, required, desc = oa.get(schema, ([], [], {}))
        by_norm = {norm(n): n for n in names}
        print("M " + name)
        for tag, fname, kind, target, repeated in sorted(pb[name], key=lambda f: f[0]):
            json = by_norm.get(norm(fname), camel(fname))
            flags = ""
            if names and kind == "message" and norm(fname) not in by_norm and inline(pb, oa, target, names):
                # A Go struct embedded with `json:",inline"` (Probe's ProbeHandler, Volume's
                # VolumeSource): its own message on the wire, its fields flattened in JSON.
                flags += "i"
            if repeated:
                flags += "r"
            if json in required:
                flags += "q"
            if kind in ("int32", "int64", "bool", "double") and not repeated:
                d = desc.get(json, "")
                if (
                    NONZERO_DEFAULT.search(d)
                    or "pointer to distinguish" in d
                    or NIL_MEANS.search(d)
                    or (kind != "bool" and ZERO_MEANS.search(d) and not ZERO_DEFAULT.search(d))
                ):
                    flags += "z"
            line = "F %d %s %s" % (tag, json, kind)
            if target:
                line += " " + target
            if flags:
                line += " " + flags
            print(line)


if __name__ == "__main__":
    main()
