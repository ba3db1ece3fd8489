//! `moco controller` accepts exactly what the install manifests pass: the container args of the
//! Deployment in `deploy/` and of the chart's Deployment (with extra args), read from the YAML
//! and parsed by the subcommand's clap definition. (The real binary run with them is moco-bin's
//! `controller_args` test.)

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use clap::Parser;
use moco_operator::{ControllerArgs, ListenAddr, ServeConfig};
use moco_testkit::{controller_container, deploy_container, repo, strings};
use serde_json::Value;

#[derive(Debug, Parser)]
#[command(name = "moco")]
struct Cli {
    #[command(subcommand)]
    command: Sub,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    Controller(ControllerArgs),
}

fn parse(args: &[String]) -> Result<ControllerArgs, clap::Error> {
    let argv = ["moco", "controller"]
        .map(str::to_owned)
        .into_iter()
        .chain(args.iter().cloned());
    Cli::try_parse_from(argv).map(|cli| match cli.command {
        Sub::Controller(a) => a,
    })
}

/// The Deployment's args after `controller`.
fn subcommand_args(args: &[String]) -> Vec<String> {
    assert_eq!(
        args.first().map(String::as_str),
        Some("controller"),
        "the image runs `moco controller`: {args:?}"
    );
    args[1..].to_vec()
}

#[test]
fn deploy_deployment_args_parse() {
    let container = deploy_container();
    let args = subcommand_args(&strings(&container["args"]));
    assert!(args.len() >= 5, "{args:?}");
    let parsed = parse(&args).unwrap_or_else(|e| panic!("deploy/ args {args:?}: {e}"));
    assert_eq!(parsed.metrics_addr, ListenAddr::AllInterfaces(8080));
    assert_eq!(parsed.health_probe_addr, ListenAddr::AllInterfaces(8081));
    assert_eq!(parsed.webhook_addr, ListenAddr::AllInterfaces(9443));
    assert_eq!(parsed.reconciler.leader_election_id, "moco");
    assert_eq!(parsed.reconciler.check_interval, Duration::from_secs(60));

    // The flags agree with the ports and volumes the Deployment declares.
    let port = |name: &str| {
        container["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .and_then(|p| p["containerPort"].as_u64())
            .unwrap_or_else(|| panic!("port {name}"))
    };
    assert_eq!(port("metrics"), 8080);
    assert_eq!(port("health"), 8081);
    assert_eq!(port("webhook-server"), 9443);
    for probe in ["livenessProbe", "readinessProbe"] {
        assert_eq!(container[probe]["httpGet"]["port"], "health", "{probe}");
    }
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    let mounts: Vec<String> = container["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["mountPath"].as_str().unwrap().to_owned())
        .collect();
    let config = ServeConfig::from_args(&parsed, "moco-system".into());
    assert!(
        mounts.contains(&config.cert_dir.display().to_string()),
        "--cert-dir {} is a mounted volume: {mounts:?}",
        config.cert_dir.display()
    );
    assert!(mounts.contains(&parsed.reconciler.grpc_cert_dir.display().to_string()));
    // POD_NAMESPACE comes from the pod's namespace.
    let env = container["env"].as_array().unwrap();
    let ns = env
        .iter()
        .find(|e| e["name"] == "POD_NAMESPACE")
        .expect("POD_NAMESPACE in env");
    assert_eq!(
        ns["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.namespace"
    );
}

/// The chart template's args, rendered by hand: literal items as they are, the
/// `range .Values.extraArgs` block once per extra arg. Anything else templated fails.
fn chart_args_by_hand(extra: &[&str]) -> Vec<String> {
    let text =
        std::fs::read_to_string(repo().join("charts/moco/templates/deployment.yaml")).unwrap();
    let mut lines = text.lines().skip_while(|l| l.trim() != "args:");
    assert!(lines.next().is_some(), "args: in the chart's Deployment");
    let mut args = Vec::new();
    let mut in_range = false;
    for line in lines {
        let item = line.trim();
        if item == "{{- range .Values.extraArgs }}" {
            in_range = true;
        } else if item == "{{- end }}" && in_range {
            in_range = false;
        } else if in_range {
            assert_eq!(
                item, "- {{ . | quote }}",
                "unexpected line in the range block"
            );
            args.extend(extra.iter().map(|s| (*s).to_owned()));
        } else if let Some(value) = item.strip_prefix("- ") {
            assert!(
                !value.contains("{{"),
                "templated arg {value:?} not understood"
            );
            args.push(value.trim_matches('"').to_owned());
        } else {
            break;
        }
    }
    args
}

/// The chart rendered by `helm template` or, without helm, by the repository's renderer.
fn chart_rendered(extra: &[&str]) -> Option<Vec<Value>> {
    let mut sets = Vec::new();
    for (i, arg) in extra.iter().enumerate() {
        sets.push("--set-string".to_owned());
        sets.push(format!("extraArgs[{i}]={arg}"));
    }
    let helm = Command::new("helm")
        .current_dir(repo())
        .args([
            "template",
            "moco",
            "charts/moco",
            "--namespace",
            "moco-system",
        ])
        .args(&sets)
        .output();
    let output = match helm {
        Ok(o) if o.status.success() => o,
        _ => {
            // render_chart.py knows --set only.
            let sets: Vec<String> = sets
                .iter()
                .map(|s| {
                    if s == "--set-string" {
                        "--set".to_owned()
                    } else {
                        s.clone()
                    }
                })
                .collect();
            let o = Command::new("python3")
                .current_dir(repo())
                .args([
                    "scripts/manifests/render_chart.py",
                    "charts/moco",
                    "--namespace",
                    "moco-system",
                ])
                .args(&sets)
                .output()
                .ok()?;
            if !o.status.success() {
                eprintln!(
                    "chart renderer unavailable: {}",
                    String::from_utf8_lossy(&o.stderr)
                );
                return None;
            }
            o
        }
    };
    let text = String::from_utf8(output.stdout).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    Some(docs.into_iter().filter(|d| !d.is_null()).collect())
}

const CHART_EXTRA: [&str; 6] = [
    "--check-interval=30s",
    "--agent-image=ghcr.io/cybozu-go/moco-agent:0.15.0",
    "--pvc-sync-label-keys=team",
    "--disable-default-security-context",
    "--zap-log-level=debug",
    "--max-concurrent-reconciles=4",
];

#[test]
fn chart_deployment_args_parse() {
    let base = chart_args_by_hand(&[]);
    let with_extra = chart_args_by_hand(&CHART_EXTRA);
    // The chart runs the same command as deploy/.
    assert_eq!(
        base,
        strings(&deploy_container()["args"]),
        "chart and deploy/ args differ"
    );
    for args in [&base, &with_extra] {
        let sub = subcommand_args(args);
        parse(&sub).unwrap_or_else(|e| panic!("chart args {sub:?}: {e}"));
    }
    let parsed = parse(&subcommand_args(&with_extra)).unwrap();
    assert_eq!(parsed.reconciler.check_interval, Duration::from_secs(30));
    assert_eq!(
        parsed.reconciler.agent_image.as_deref(),
        Some("ghcr.io/cybozu-go/moco-agent:0.15.0")
    );
    assert_eq!(parsed.reconciler.pvc_sync_label_keys, ["team"]);
    assert!(parsed.reconciler.disable_default_security_context);
    assert_eq!(parsed.zap_log_level, Some(tracing::Level::DEBUG));
    assert_eq!(parsed.reconciler.max_concurrent_reconciles, 4);

    // Where a renderer is installed, the rendered Deployment carries the same args.
    for (extra, expected) in [(&[][..], &base), (&CHART_EXTRA[..], &with_extra)] {
        match chart_rendered(extra) {
            Some(docs) => assert_eq!(
                &strings(&controller_container(&docs)["args"]),
                expected,
                "rendered chart args"
            ),
            None => eprintln!("note: no chart renderer; checked the template by hand only"),
        }
    }
}

#[test]
fn moco_flags_beyond_the_manifests_parse() {
    let args: Vec<String> = [
        "--metrics-addr=0",
        "--health-probe-addr",
        "127.0.0.1:18081",
        "--webhook-addr=[::1]:9443",
        "--cert-dir=",
        "--pprof-addr=:6060",
        "--grpc-cert-dir=/other",
        "--backup-image=ghcr.io/cybozu-go/moco-backup:0.23.2",
        "--fluent-bit-image=ghcr.io/cybozu-go/moco/fluent-bit:3.0.2.1",
        "--mysqld-exporter-image=ghcr.io/cybozu-go/moco/mysqld_exporter:0.15.1.2",
        "--pvc-sync-annotation-keys=a,b",
        "--pvc-sync-annotation-keys=c",
        "--mysql-configmap-history-limit=3",
        "--partition-update-interval=100ms",
        "--disable-default-security-context=false",
        "--apiserver-qps-throttle=50",
        "--zap-devel",
        "--zap-encoder=console",
        "--zap-stacktrace-level=panic",
        "--zap-time-encoding=rfc3339",
        "-v=2",
        "--vmodule=foo=3",
        "--log_backtrace_at=file.go:10",
    ]
    .map(str::to_owned)
    .to_vec();
    let parsed = parse(&args).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(parsed.metrics_addr, ListenAddr::Disabled);
    assert_eq!(
        parsed.health_probe_addr,
        ListenAddr::Socket(SocketAddr::from(([127, 0, 0, 1], 18081)))
    );
    assert_eq!(parsed.reconciler.pvc_sync_annotation_keys, ["a", "b", "c"]);
    assert_eq!(
        parsed.reconciler.partition_update_interval,
        Duration::from_millis(100)
    );
    assert!(!parsed.reconciler.disable_default_security_context);
    assert!(parsed.zap_devel);
    assert_eq!(parsed.compat.klog_verbosity, Some(2));
    // An empty --cert-dir is controller-runtime's default directory.
    assert!(
        ServeConfig::from_args(&parsed, "ns".into())
            .cert_dir
            .ends_with("k8s-webhook-server/serving-certs")
    );

    // Defaults are MOCO's.
    let defaults = parse(&[]).unwrap();
    assert_eq!(defaults.metrics_addr, ListenAddr::AllInterfaces(8080));
    assert_eq!(defaults.health_probe_addr, ListenAddr::AllInterfaces(8081));
    assert_eq!(defaults.webhook_addr, ListenAddr::AllInterfaces(9443));
    assert_eq!(
        defaults.reconciler.grpc_cert_dir,
        PathBuf::from("/grpc-cert")
    );
    assert_eq!(defaults.reconciler.max_concurrent_reconciles, 8);
    assert_eq!(defaults.reconciler.mysql_configmap_history_limit, 10);
    assert_eq!(defaults.compat.apiserver_qps_throttle, 20);
    assert_eq!(
        defaults.reconciler.partition_update_interval,
        Duration::ZERO
    );
    assert_eq!(defaults.reconciler.pre_stop.mysqld_pre_stop_seconds, 20);
    let short = parse(&["--mysqld-pre-stop-seconds=3".to_owned()]).unwrap();
    assert_eq!(short.reconciler.pre_stop.mysqld_pre_stop_seconds, 3);

    // Not MOCO flags, or bad values: refused.
    for bad in [
        &["--no-such-flag"][..],
        &["--check-interval=10"],
        &["--webhook-addr=9443"],
        &["--disable-default-security-context", "true"],
        &["--zap-encoder=text"],
        &["--mysqld-pre-stop-seconds=0"],
        &["--mysqld-pre-stop-seconds=3601"],
    ] {
        let bad: Vec<String> = bad.iter().map(|s| (*s).to_owned()).collect();
        assert!(parse(&bad).is_err(), "{bad:?} accepted");
    }
}
