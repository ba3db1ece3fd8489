//! A real Azure Blob Storage server on loopback for the backup tests: Azurite's, from npm.
#![allow(clippy::unwrap_used)]

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ring::hmac;

use crate::object_store::raw_put;

/// Azurite's one account.
pub const ACCOUNT: &str = "devstoreaccount1";
/// Its well-known key (Azurite's README), base64.
pub const KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// An Azurite blob server on a free loopback port with its data in a temporary directory,
/// killed when dropped.
#[derive(Debug)]
pub struct Azurite {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
    // Dropped after the server is killed (fields drop after `Drop::drop`).
    _dir: tempfile::TempDir,
}

impl Drop for Azurite {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Azurite {
    /// The account's URL, as MOCO's `endpointURL` names an emulator:
    /// `http://127.0.0.1:PORT/devstoreaccount1`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}/{ACCOUNT}", self.port)
    }
}

/// Starts Azurite's blob server (`MOCO_AZURITE_BLOB`, which `scripts/test.sh` installs, else
/// `azurite-blob` in `PATH`) and records the test in the real-server ledger. Without it the
/// test fails, unless `MOCO_SKIP_OBJECT_STORES=1` (then `None`).
pub fn azurite(test: &str) -> Option<Azurite> {
    let program = std::env::var("MOCO_AZURITE_BLOB").unwrap_or_else(|_| "azurite-blob".to_owned());
    let dir = tempfile::tempdir().unwrap();
    // Chosen as the servers' ports are, so that no other test of this process is given it.
    let port = moco_adapters::mysqld::free_port().unwrap_or_else(|e| panic!("{e}"));
    let log = dir.path().join("azurite.log");
    let child = match Command::new(&program)
        .args(["--blobHost", "127.0.0.1", "--blobPort", &port.to_string()])
        .arg("--location")
        .arg(dir.path())
        // Without it Azurite sends telemetry; the API version check would refuse a newer
        // client than it knows.
        .args(["--disableTelemetry", "--skipApiVersionCheck"])
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::fs::File::create(dir.path().join("azurite.err")).unwrap())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return crate::s3::missing_store(test, &program, "MOCO_AZURITE_BLOB", &e),
    };
    let mut server = Azurite {
        child,
        port,
        _dir: dir,
    };
    let version = Command::new(&program)
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or_else(
            || "(version unknown)".to_owned(),
            |o| String::from_utf8_lossy(&o.stdout).trim().to_owned(),
        );
    moco_testkit::ledger::record(test, &format!("Azurite {version} (Azure Blob)"));
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Some(status) = server.child.try_wait().unwrap() {
            let out = |name| std::fs::read_to_string(server._dir.path().join(name));
            panic!(
                "{program} exited ({status}) before listening on {port}: {:?} {:?}",
                out("azurite.log"),
                out("azurite.err"),
            );
        }
        assert!(
            Instant::now() < deadline,
            "Azurite never listened on {port}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    Some(server)
}

/// The REST API version the requests name.
const VERSION: &str = "2021-08-06";

/// Creates a container (Create Container, signed with the account's key as Azurite requires).
pub async fn create_container(port: u16, name: &str) {
    let answer = signed_put(
        port,
        &format!("{name}?restype=container"),
        &format!("{name}\nrestype:container"),
        &[],
        b"",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
}

/// Puts `body` as the blob `name` of `container` with a raw request, signed as Azurite
/// requires, so that the name reaches the store as written (object_store refuses to write
/// `a//b` or `x/../y`; Azure stores them).
pub async fn put_blob_raw(port: u16, container: &str, name: &str, body: &[u8]) {
    let path = format!("{container}/{name}");
    let answer = signed_put(port, &path, &path, &[("x-ms-blob-type", "BlockBlob")], body).await;
    assert!(answer.starts_with("HTTP/1.1 201"), "{name}: {answer}");
}

/// `PUT /devstoreaccount1/<path>` (`path` with its query) on Azurite at `port` with the
/// `x-ms-` headers `x_ms` (named in order, before `x-ms-date`) and `body`, signed with the
/// account's key (Shared Key); `resource` is the path again as signed: without its query,
/// then its parameters as `name:value` lines. Returns the answer.
async fn signed_put(
    port: u16,
    path: &str,
    resource: &str,
    x_ms: &[(&str, &str)],
    body: &[u8],
) -> String {
    let date = http_date(SystemTime::now());
    let mut headers = x_ms.to_vec();
    headers.extend([("x-ms-date", date.as_str()), ("x-ms-version", VERSION)]);
    // Shared Key's string to sign: the verb, eleven standard headers (all empty here but the
    // length of a body), the `x-ms-` headers sorted, and the resource: the account, then the
    // path, which for an emulator starts with the account again, then the query parameters.
    let length = if body.is_empty() {
        String::new()
    } else {
        body.len().to_string()
    };
    let signed_headers: String = headers.iter().map(|(k, v)| format!("{k}:{v}\n")).collect();
    let to_sign = format!(
        "PUT\n\n\n{length}\n\n\n\n\n\n\n\n\n{signed_headers}/{ACCOUNT}/{ACCOUNT}/{resource}"
    );
    let key = hmac::Key::new(hmac::HMAC_SHA256, &base64_decode(KEY));
    let signature = base64_encode(hmac::sign(&key, to_sign.as_bytes()).as_ref());
    let authorization = format!("SharedKey {ACCOUNT}:{signature}");
    headers.push(("Authorization", &authorization));
    raw_put(
        &format!("127.0.0.1:{port}"),
        &format!("/{ACCOUNT}/{path}"),
        &headers,
        body,
    )
    .await
}

/// `Sun, 06 Nov 1994 08:49:37 GMT` (RFC 7231's IMF-fixdate).
fn http_date(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).unwrap().as_secs();
    let (days, rest) = ((secs / 86_400) as i64, secs % 86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    const WEEKDAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "{}, {day:02} {} {year} {:02}:{:02}:{:02} GMT",
        WEEKDAYS[days.rem_euclid(7) as usize],
        MONTHS[(month - 1) as usize],
        rest / 3_600,
        rest / 60 % 60,
        rest % 60,
    )
}

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(BASE64[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn base64_decode(text: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let (mut n, mut bits) = (0u32, 0);
    for c in text.bytes().filter(|c| *c != b'=') {
        let v = BASE64.iter().position(|b| *b == c).unwrap();
        n = (n << 6) | v as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((n >> bits) as u8);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_base64() {
        assert_eq!(
            http_date(UNIX_EPOCH + Duration::from_secs(784_111_777)),
            "Sun, 06 Nov 1994 08:49:37 GMT"
        );
        assert_eq!(
            http_date(UNIX_EPOCH + Duration::from_secs(951_782_400)),
            "Tue, 29 Feb 2000 00:00:00 GMT"
        );
        for (raw, text) in [
            (&b""[..], ""),
            (b"f", "Zg=="),
            (b"fo", "Zm8="),
            (b"foo", "Zm9v"),
            (b"foob", "Zm9vYg=="),
        ] {
            assert_eq!(base64_encode(raw), text);
            assert_eq!(base64_decode(text), raw);
        }
        assert_eq!(base64_encode(&base64_decode(KEY)), KEY);
    }
}
