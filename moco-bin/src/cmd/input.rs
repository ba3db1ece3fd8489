//! Reading a command's input (a file, or standard input for `-`) with a size limit, so that
//! `moco plan --facts /dev/zero` or a runaway pipe ends with an error instead of taking all
//! memory.

use std::io::Read;

/// The most any command reads from one input: facts or manifests far beyond any real cluster.
pub(crate) const MAX_INPUT_BYTES: u64 = 16 * 1024 * 1024;

/// The text of `path` (`-` = standard input), refused with `InvalidData` when it is larger
/// than [`MAX_INPUT_BYTES`] or not UTF-8.
pub(crate) fn read_text(path: &str) -> std::io::Result<String> {
    let reader: Box<dyn Read> = if path == "-" {
        Box::new(std::io::stdin())
    } else {
        Box::new(std::fs::File::open(path)?)
    };
    let mut text = String::new();
    reader.take(MAX_INPUT_BYTES + 1).read_to_string(&mut text)?;
    if text.len() as u64 > MAX_INPUT_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "larger than {} MiB, the most a moco command reads",
                MAX_INPUT_BYTES / 1024 / 1024
            ),
        ));
    }
    Ok(text)
}
