#!/usr/bin/env python3
"""Rewrites facts written for moco-core 0.1's unversioned layout as `schemaVersion: 1`.

Usage: scripts/migrate-facts-v1.py FILE...   (rewrites each file in place)

A file may hold facts, or a scenario (`{"facts": ...}`), or a list of either. Every default
the old layout applied silently is written out explicitly, so the migrated file decides exactly
as before (see CHANGELOG.md, "Facts schema version 1").
"""
import json
import sys

SEMI_SYNC = {
    "masterEnabled": "sourceEnabled",
    "slaveEnabled": "replicaEnabled",
    "waitForSlaveCount": "waitForReplicaCount",
    "masterTimeoutMs": "sourceTimeoutMs",
    "masterClients": "sourceClients",
}
THREAD = {"Yes": "yes", "Connecting": "connecting", "No": "no"}
CLONE = {"NotStarted": "notStarted", "InProgress": "inProgress", "Completed": "completed", "Failed": "failed"}


def semi_sync(old):
    new = {SEMI_SYNC.get(k, k): v for k, v in (old or {}).items()}
    for key in ("sourceEnabled", "replicaEnabled"):
        new.setdefault(key, False)
    for key in ("waitForReplicaCount", "sourceTimeoutMs", "sourceClients"):
        new.setdefault(key, None)
    new.setdefault("waitSessions", 0)
    return new


def replica_status(old):
    if old is None:
        return None
    new = dict(old)
    new["ioRunning"] = THREAD.get(new["ioRunning"], new["ioRunning"])
    sql = new.get("sqlRunning")
    new["sqlRunning"] = "yes" if sql is True else "no" if sql is False else THREAD.get(sql, sql)
    new.setdefault("retrievedGtidSet", "")
    new.setdefault("secondsBehindSource", None)
    return new


def mysqld(old, flavor):
    if old is None:
        return None
    new = dict(old)
    new.setdefault("flavor", flavor)
    new.setdefault("serverUuid", None)
    new.setdefault("gtidExecuted", "")
    new.setdefault("gtidPurged", "")
    new["semiSync"] = semi_sync(new.get("semiSync"))
    new["replicaStatus"] = replica_status(new.get("replicaStatus"))
    new.setdefault("replicaHosts", [])
    for host in new["replicaHosts"]:
        host.setdefault("host", "")
        host.setdefault("port", 0)
    state = new.get("cloneState")
    new["cloneState"] = CLONE.get(state, state)
    return new


def facts(old):
    if "schemaVersion" in old:
        return old
    spec = dict(old["spec"])
    for key, default in (("restore", False), ("offline", False), ("maxDelaySecondsForPodDeletion", 0),
                         ("flavor", "mysql"), ("recloneErrant", False), ("startupWaitSeconds", 3600)):
        spec.setdefault(key, default)
    instances = []
    for inst in old.get("instances", []):
        inst = dict(inst)
        pod = dict(inst.get("pod", {}))
        pod.setdefault("exists", True)  # the old layout's silent default
        for key in ("ready", "deleting", "demote", "preventDelete"):
            pod.setdefault(key, False)
        inst["pod"] = pod
        inst["mysqld"] = mysqld(inst.get("mysqld"), spec["flavor"])
        instances.append(inst)
    new = {"schemaVersion": 1, "spec": spec, "status": old.get("status", {}), "now": old["now"],
           "instances": instances}
    if old.get("switchoverTo") is not None:
        new["switchoverTo"] = old["switchoverTo"]
    return new


def migrate(doc):
    if isinstance(doc, list):
        return [migrate(d) for d in doc]
    if "facts" in doc:
        return dict(doc, facts=facts(doc["facts"]))
    return facts(doc)


def main(paths):
    for path in paths:
        with open(path) as fh:
            doc = json.load(fh)
        with open(path, "w") as fh:
            json.dump(migrate(doc), fh, indent=2)
            fh.write("\n")


if __name__ == "__main__":
    main(sys.argv[1:])
