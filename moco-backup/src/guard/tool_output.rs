//! What of a tool's output may travel beyond the Job's log. `mariadb-backup`, `mysqlsh`,
//! `mysqlbinlog` and the clients quote row values and statements in their errors
//! (`Duplicate entry 'alice@example.com' for key …`, `… near 'INSERT … VALUES (…)'`), and
//! an error message ends up in a Warning Event and `status.backup.warnings`, which anyone
//! who may read the MySQLCluster reads. The Job's log keeps every line; an error carries an
//! [`excerpt`]: the last lines, cut to a size, with what is quoted redacted. [`for_status`]
//! does the same to a whole message before it becomes an Event or a warning.

use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::Path;

/// At most this many bytes of a tool's output in an error.
pub const EXCERPT_BYTES: usize = 1024;
/// At most this many of its last lines.
pub const EXCERPT_LINES: usize = 10;
/// At most this many bytes of a message in an Event or a warning.
pub const STATUS_BYTES: usize = 1024;
/// What stands for a redacted value.
const REDACTED: &str = "…";

/// The last lines of a tool's `output`, at most [`EXCERPT_LINES`] and [`EXCERPT_BYTES`],
/// trimmed, with single- and double-quoted text redacted.
pub fn excerpt(output: &str) -> String {
    let lines: Vec<&str> = output
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .collect();
    let last = &lines[lines.len().saturating_sub(EXCERPT_LINES)..];
    let redacted: Vec<String> = last
        .iter()
        .map(|l| redact_line(&redact_line(l, '\''), '"'))
        .collect();
    keep_last(&redacted.join("\n"), EXCERPT_BYTES)
}

/// [`excerpt`] of the end of the log file `path` (a missing or unreadable file: empty).
pub fn log_excerpt(path: &Path) -> String {
    let Ok(mut file) = std::fs::File::open(path) else {
        return String::new();
    };
    // The end of a log holds its last lines; no more than this is read of a large one.
    const TAIL: u64 = 64 << 10;
    let len = file.metadata().map_or(0, |m| m.len());
    if file
        .seek(SeekFrom::Start(len.saturating_sub(TAIL)))
        .is_err()
    {
        return String::new();
    }
    let mut bytes = Vec::new();
    if file.take(TAIL).read_to_end(&mut bytes).is_err() {
        return String::new();
    }
    excerpt(&String::from_utf8_lossy(&bytes))
}

/// A message as it may go into an Event or `status.backup.warnings`: single-quoted text
/// redacted (MariaDB's and MySQL's tools quote values so, wherever their output came from:
/// an agent's answer too; this program's own messages quote with `"`), at most
/// [`STATUS_BYTES`] (its start kept: it says what failed).
pub fn for_status(message: &str) -> String {
    let redacted: Vec<String> = message.lines().map(|l| redact_line(l, '\'')).collect();
    keep_first(&redacted.join("\n"), STATUS_BYTES)
}

/// `line` with the text between its first opening `quote` and its last closing one replaced
/// by `…`: nested and unescaped quotes (`'O'Brien'`, a statement quoted whole) stay inside
/// the redaction. A quote opens where no letter or digit comes before it (`can't` opens
/// nothing) and closes where none follows; an opening without a closing redacts to the end.
fn redact_line(line: &str, quote: char) -> String {
    let chars: Vec<(usize, char)> = line.char_indices().collect();
    let word = |i: usize| chars.get(i).is_some_and(|(_, c)| c.is_alphanumeric());
    let open = (0..chars.len()).find(|&i| chars[i].1 == quote && (i == 0 || !word(i - 1)));
    let Some(open) = open else {
        return line.to_owned();
    };
    let close = (open + 1..chars.len())
        .rev()
        .find(|&i| chars[i].1 == quote && !word(i + 1));
    let start = chars[open].0;
    match close {
        Some(close) => {
            let end = chars[close].0 + quote.len_utf8();
            format!("{}{quote}{REDACTED}{quote}{}", &line[..start], &line[end..])
        }
        None => format!("{}{quote}{REDACTED}", &line[..start]),
    }
}

/// The last `max` bytes of `text` at most (at a character boundary).
fn keep_last(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("{REDACTED}{}", &text[start..])
}

/// The first `max` bytes of `text` at most (at a character boundary).
fn keep_first(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{REDACTED}", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_values_are_redacted_and_the_rest_says_what_failed() {
        for (line, expected) in [
            (
                "ERROR 1062 (23000) at line 5: Duplicate entry 'alice@example.com' for key 'email'",
                "ERROR 1062 (23000) at line 5: Duplicate entry '…'",
            ),
            (
                "ERROR 1064 (42000): syntax error near 'INSERT INTO t VALUES ('s3cret')' at line 1",
                "ERROR 1064 (42000): syntax error near '…' at line 1",
            ),
            (
                "Duplicate entry 'O'Brien' for key 'name'",
                "Duplicate entry '…'",
            ),
            (
                "ERROR 2002 (HY000): Can't connect to server on 'db' (115)",
                "ERROR 2002 (HY000): Can't connect to server on '…' (115)",
            ),
            ("no quotes at all", "no quotes at all"),
            ("an opening 'without its end", "an opening '…"),
        ] {
            assert_eq!(redact_line(line, '\''), expected, "{line}");
        }
        assert_eq!(
            excerpt("first\n\nsay \"password\": \"hunter2\"\n"),
            "first\nsay \"…\""
        );
    }

    #[test]
    fn an_excerpt_keeps_the_last_lines_and_bytes() {
        let many: String = (0..50).map(|i| format!("line {i}\n")).collect();
        let e = excerpt(&many);
        assert_eq!(e.lines().count(), EXCERPT_LINES);
        assert!(e.ends_with("line 49"), "{e}");
        let long = "é".repeat(2 * EXCERPT_BYTES);
        assert!(excerpt(&long).len() <= EXCERPT_BYTES + REDACTED.len());
        let status = for_status(&"x".repeat(3 * STATUS_BYTES));
        assert!(status.len() <= STATUS_BYTES + REDACTED.len());
        assert_eq!(
            for_status("key \"moco/ns/db/x\": Duplicate entry 'v'"),
            "key \"moco/ns/db/x\": Duplicate entry '…'"
        );
    }

    proptest::proptest! {
        /// Whatever the line, a value quoted in it (between two quotes that open and close)
        /// is gone from the redacted line.
        #[test]
        fn a_quoted_value_never_survives(
            before in "[a-z :(]{0,12}",
            value in "[A-Za-z0-9@.'-]{1,16}",
            after in "[a-z :)]{0,12}",
        ) {
            let before = if before.ends_with(|c: char| c.is_alphanumeric()) {
                format!("{before} ")
            } else {
                before
            };
            let line = format!("{before}'SECRET{value}'{after}");
            let redacted = redact_line(&line, '\'');
            proptest::prop_assert!(!redacted.contains("SECRET"), "{line} -> {redacted}");
        }
    }
}
