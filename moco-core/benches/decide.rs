//! decide + plan for clusters of 3, 5 and 99 instances, healthy (nothing to plan) and with a
//! failed primary (failover). The facts are the Healthy example of `docs/examples/facts`,
//! scaled to N instances. Also GTID sets of 100,000 intervals: parsing (in order and reversed)
//! and subtraction. Numbers and method: docs/benchmarks.md.

#![allow(clippy::expect_used)]

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use moco_core::decide;
use moco_core::facts::{ClusterFacts, ReplicaHost};
use moco_core::gtid::GtidSet;

const HEALTHY: &str = include_str!("../../docs/examples/facts/healthy.json");

fn scaled(n: u32) -> ClusterFacts {
    let mut f: ClusterFacts = serde_json::from_str(HEALTHY).expect("example facts parse");
    let replica = f.instances[1].clone();
    f.spec.replicas = n;
    f.instances.truncate(1);
    for i in 1..n {
        let mut r = replica.clone();
        r.index = i;
        r.host = format!("moco-test-{i}.moco-test.default.svc");
        if let Some(m) = r.mysqld.as_mut() {
            m.server_id = f.spec.server_id_base + i;
            m.server_uuid = Some(format!("00000000-0000-0000-0000-{:012}", i + 1));
        }
        f.instances.push(r);
    }
    let hosts: Vec<ReplicaHost> = (1..n)
        .map(|i| ReplicaHost {
            server_id: f.spec.server_id_base + i,
            host: format!("moco-test-{i}.moco-test.default.svc"),
            port: 3306,
        })
        .collect();
    if let Some(p) = f.instances[0].mysqld.as_mut() {
        p.replica_hosts = hosts;
        p.semi_sync.wait_for_replica_count = Some(n / 2);
        p.semi_sync.source_clients = Some(n - 1);
    }
    f
}

fn failed(n: u32) -> ClusterFacts {
    let mut f = scaled(n);
    f.instances[0].mysqld = None;
    for inst in f.instances.iter_mut().skip(1) {
        if let Some(r) = inst.mysqld.as_mut().and_then(|m| m.replica_status.as_mut()) {
            r.io_running = moco_core::facts::ThreadState::No;
        }
    }
    f
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("decide");
    for n in [3u32, 5, 99] {
        let healthy = scaled(n);
        assert_eq!(decide(&healthy).expect("decides").steps.len(), 0);
        group.bench_with_input(BenchmarkId::new("healthy", n), &healthy, |b, f| {
            b.iter(|| decide(black_box(f)))
        });
        let failed = failed(n);
        assert!(!decide(&failed).expect("decides").steps.is_empty());
        group.bench_with_input(BenchmarkId::new("failover", n), &failed, |b, f| {
            b.iter(|| decide(black_box(f)))
        });
    }
    group.finish();
}

/// `uuid:1:3:5:…`, one transaction per interval (every other number), `n` intervals.
fn holes(n: u64, reversed: bool) -> String {
    let mut numbers: Vec<String> = (0..n).map(|i| (2 * i + 1).to_string()).collect();
    if reversed {
        numbers.reverse();
    }
    format!("3E11FA47-71CA-11E1-9E33-C80AA9429562:{}", numbers.join(":"))
}

fn gtid(c: &mut Criterion) {
    let mut group = c.benchmark_group("gtid");
    group.sample_size(10);
    let n = 100_000;
    let sorted = holes(n, false);
    let reversed = holes(n, true);
    group.bench_function("parse 100k intervals", |b| {
        b.iter(|| GtidSet::parse(black_box(&sorted)))
    });
    group.bench_function("parse 100k intervals reversed", |b| {
        b.iter(|| GtidSet::parse(black_box(&reversed)))
    });
    let a = GtidSet::parse(&sorted).expect("parses");
    let shifted = GtidSet::parse(&format!(
        "3E11FA47-71CA-11E1-9E33-C80AA9429562:{}",
        (0..n)
            .map(|i| (2 * i + 2).to_string())
            .collect::<Vec<_>>()
            .join(":")
    ))
    .expect("parses");
    group.bench_function("subtract 100k from 100k intervals", |b| {
        b.iter(|| black_box(&a).subtract(black_box(&shifted)))
    });
    group.bench_function("union 100k and 100k intervals", |b| {
        b.iter(|| black_box(&a).union(black_box(&shifted)))
    });
    group.finish();
}

criterion_group!(benches, bench, gtid);
criterion_main!(benches);
