//! Issue 30, section 0: the README's first command, run exactly as the README prints it, in a
//! pseudo-terminal as a person runs it: it brings a cluster up to Healthy, Ctrl-C stops it,
//! and no server is left running. (`cargo run` once refused to choose between `moco-bin`'s two
//! binaries, and no test ran the README's commands as written.)
//!
//! It runs in the checkout's root, where the script keeps its cluster (`.moco-local`); a
//! developer's own cluster there is never touched: the test refuses to start beside it. The
//! script builds `moco` with the `local` profile (minutes on a cold machine; the test command
//! builds it before the tests run).

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use moco_tests::local::{processes_mentioning, server_or_skip, without_test_env};

/// The README's first command, read from the README itself.
fn first_command(root: &Path) -> String {
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let block = readme
        .split("```sh\n")
        .nth(1)
        .expect("the README starts with a sh block");
    let line = block.lines().next().expect("a first line");
    line.split('#').next().unwrap().trim().to_owned()
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

#[test]
fn the_readmes_first_command_runs_a_cluster_that_ctrl_c_stops() {
    if server_or_skip("the_readmes_first_command_runs_a_cluster_that_ctrl_c_stops").is_none() {
        return;
    }
    let root = root();
    let command = first_command(&root);
    assert_eq!(
        command, "scripts/local.sh",
        "the README's first command changed"
    );
    let cluster = root.join(".moco-local");
    assert!(
        !cluster.exists(),
        "{} exists: a cluster of your own; this test runs the README's command there and will \
         not touch it (move it away to run this test)",
        cluster.display()
    );

    // `script` gives the command a pseudo-terminal; what the test writes to its stdin is
    // typed at that terminal, so 0x03 is a Ctrl-C delivered by the terminal as SIGINT.
    // As a user's shell would run it (see `without_test_env`).
    let mut script = Command::new("script");
    without_test_env(&mut script);
    let mut child = script
        .args(["-qfec", &command, "/dev/null"])
        .current_dir(&root)
        .env_remove("MOCO_BIN")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("script (util-linux) runs");
    let mut stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 {
                break;
            }
            let _ = tx.send(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
    });
    // A cold build takes minutes on two cores; bring-up takes seconds.
    let deadline = Instant::now() + Duration::from_secs(45 * 60);
    let mut seen = String::new();
    while !seen.contains("Healthy") {
        match rx.recv_timeout(Duration::from_secs(1)) {
            Ok(chunk) => seen.push_str(&chunk),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                panic!("the command ended before the cluster was Healthy:\n{seen}")
            }
        }
        assert!(
            Instant::now() < deadline,
            "not Healthy after 45 minutes:\n{seen}"
        );
    }
    let servers = processes_mentioning(&cluster.display().to_string());
    assert!(
        !servers.is_empty(),
        "no server of {} runs",
        cluster.display()
    );

    // Ctrl-C, as typed at the terminal.
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&[0x03]).unwrap();
    stdin.flush().unwrap();
    let stopped = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            stopped.elapsed() < Duration::from_secs(180),
            "still running 180 s after Ctrl-C"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    drop(stdin);
    let _ = reader.join();
    while let Ok(chunk) = rx.try_recv() {
        seen.push_str(&chunk);
    }
    let mut left = processes_mentioning(&cluster.display().to_string());
    left.extend(processes_mentioning("--dir .moco-local"));
    // Remove the cluster the command made, whatever the assertions below say.
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    let moco = target.join("local/moco");
    let wiped = Command::new(&moco)
        .args([
            "local",
            "down",
            "--dir",
            &cluster.display().to_string(),
            "--wipe",
        ])
        .output();
    assert!(
        left.is_empty(),
        "servers left after Ctrl-C: {left:?}\n{seen}"
    );
    println!(
        "Healthy, then stopped {:.1} s after Ctrl-C (exit {status})",
        stopped.elapsed().as_secs_f64()
    );
    assert!(
        wiped.as_ref().is_ok_and(|o| o.status.success()),
        "down --wipe: {wiped:?}"
    );
    assert!(!cluster.exists(), "{} left behind", cluster.display());
}
