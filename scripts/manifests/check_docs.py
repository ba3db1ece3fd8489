#!/usr/bin/env python3
"""Validate every document of the given YAML streams offline.

Usage: check_docs.py --crds CRD.yaml [--crds ...] --k8s-version 1.33.0 LABEL=FILE...

* built-in kinds: `kubernetes-validate --strict -k VERSION` (one call for all of them);
* kinds defined by the given CRDs (MySQLCluster, BackupPolicy): JSON Schema validation against
  the CRD's openAPIV3Schema, made strict (unknown fields rejected) and nullable-aware;
* cert-manager Issuer/Certificate: against the small strict schemas in cert-manager.json next
  to this script (only the fields moco-rs manifests use);
* anything else: a failure (nothing may go unchecked).

Prints one line per document, "ok   LABEL:N kind/name" or "FAIL LABEL:N kind/name: reason",
and exits 1 if any document failed.
"""
import copy
import json
import os
import re
import subprocess
import sys
import tempfile

import jsonschema
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))


def strict_schema(node):
    """Copy of an openAPIV3 schema that rejects unknown fields and accepts null where nullable."""
    node = copy.deepcopy(node)

    def walk(n):
        if isinstance(n, dict):
            if n.get("nullable") is True and "type" in n:
                n["type"] = [n["type"], "null"]
            if (
                n.get("type") in ("object", ["object", "null"])
                and "properties" in n
                and "additionalProperties" not in n
                and not n.get("x-kubernetes-preserve-unknown-fields")
            ):
                n["additionalProperties"] = False
            for key, value in n.items():
                if key == "properties":
                    for prop in value.values():
                        walk(prop)
                elif key not in ("enum", "default", "example", "required"):
                    walk(value)
        elif isinstance(n, list):
            for item in n:
                walk(item)

    walk(node)
    return node


def load_crd_schemas(paths):
    schemas = {}
    for path in paths:
        with open(path) as f:
            for doc in yaml.safe_load_all(f):
                if not doc or doc.get("kind") != "CustomResourceDefinition":
                    continue
                group = doc["spec"]["group"]
                kind = doc["spec"]["names"]["kind"]
                for version in doc["spec"]["versions"]:
                    schema = version["schema"]["openAPIV3Schema"]
                    schemas[(f"{group}/{version['name']}", kind)] = (
                        strict_schema(schema), f"schema of CRD {doc['metadata']['name']}")
    with open(os.path.join(HERE, "cert-manager.json")) as f:
        for key, schema in json.load(f).items():
            api_version, kind = key.split(" ")
            schemas[(api_version, kind)] = (schema, "cert-manager.json schema")
    return schemas


def is_builtin(api_version):
    group = api_version.split("/")[0] if "/" in api_version else ""
    return group == "" or group.endswith(".k8s.io") or group in (
        "apps", "batch", "policy", "autoscaling", "apiextensions.k8s.io")


def main(argv):
    crds, version, inputs = [], "1.33.0", []
    i = 0
    while i < len(argv):
        if argv[i] == "--crds":
            crds.append(argv[i + 1])
            i += 2
        elif argv[i] == "--k8s-version":
            version = argv[i + 1]
            i += 2
        else:
            inputs.append(argv[i])
            i += 1
    schemas = load_crd_schemas(crds)
    results = []  # (label, status, detail)
    builtin = []  # (label, path)
    with tempfile.TemporaryDirectory() as tmp:
        for item in inputs:
            label, _, path = item.partition("=")
            with open(path) as f:
                try:
                    docs = [d for d in yaml.safe_load_all(f) if d is not None]
                except yaml.YAMLError as e:
                    results.append((label, False, f"not valid YAML: {e}"))
                    continue
            for n, doc in enumerate(docs, 1):
                if not isinstance(doc, dict) or "apiVersion" not in doc or "kind" not in doc:
                    results.append((f"{label}:{n}", False, "not a Kubernetes object"))
                    continue
                name = (doc.get("metadata") or {}).get("name", "")
                what = f"{label}:{n} {doc['kind']}/{name}"
                key = (doc["apiVersion"], doc["kind"])
                if key in schemas:
                    schema, source = schemas[key]
                    errors = sorted(
                        jsonschema.Draft7Validator(schema).iter_errors(doc),
                        key=lambda e: list(map(str, e.path)),
                    )
                    if errors:
                        detail = "; ".join(
                            f"{'.'.join(map(str, e.path)) or '<root>'}: {e.message}" for e in errors[:5])
                        results.append((what, False, detail))
                    else:
                        results.append((what, True, source))
                elif is_builtin(doc["apiVersion"]):
                    path = os.path.join(tmp, f"{len(builtin):04d}.yaml")
                    with open(path, "w") as out:
                        yaml.safe_dump(doc, out)
                    builtin.append((what, path))
                else:
                    results.append((what, False, f"no schema known for {doc['apiVersion']} {doc['kind']}"))
        if builtin:
            proc = subprocess.run(
                ["kubernetes-validate", "--strict", "-k", version] + [p for _, p in builtin],
                capture_output=True, text=True)
            output = proc.stdout + proc.stderr
            for what, path in builtin:
                lines = [l for l in output.splitlines() if f" {path} " in f" {l} "]
                passed = any(" passed " in l for l in lines) and not any(
                    l.startswith("ERROR") or " did not validate" in l for l in lines)
                detail = "; ".join(l.replace(path, "").strip() for l in lines if not l.startswith("INFO"))
                results.append((what, passed, detail or f"kubernetes-validate --strict -k {version}"))
    failed = 0
    for what, ok, detail in results:
        if ok:
            print(f"ok   {what} ({detail})")
        else:
            failed += 1
            print(f"FAIL {what}: {detail}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
