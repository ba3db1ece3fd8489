#!/usr/bin/env python3
"""compare_renders.py KUSTOMIZE.yaml CHART.yaml: the objects both install must be the same.

Helm-only labels (managed-by, version) and the container image/pull policy (set from values)
are ignored. Prints one line per object ("ok   kind/name" or "FAIL kind/name: ...") and
exits 1 on any difference or on an object missing from either side.
"""
import sys

import yaml

HELM_LABELS = ("app.kubernetes.io/managed-by", "app.kubernetes.io/version")


def normalize(doc):
    labels = doc.get("metadata", {}).get("labels") or {}
    for key in HELM_LABELS:
        labels.pop(key, None)
    if doc.get("kind") == "Deployment":
        for c in doc["spec"]["template"]["spec"].get("containers", []):
            c.pop("image", None)
            c.pop("imagePullPolicy", None)
    return doc


def load(path):
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    return {(d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): normalize(d) for d in docs}


def main(kustomize, chart):
    a, b = load(kustomize), load(chart)
    failed = 0
    for key in sorted(set(a) | set(b)):
        what = f"{key[0]}/{key[2]}"
        if key[0] == "Namespace":
            continue  # the chart installs into the release namespace instead
        if key not in a or key not in b:
            failed += 1
            print(f"FAIL {what}: only in {'the chart' if key in b else 'deploy/'}")
        elif a[key] != b[key]:
            failed += 1
            print(f"FAIL {what}: deploy/ and the chart differ")
        else:
            print(f"ok   {what} is the same in deploy/ and the chart")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
