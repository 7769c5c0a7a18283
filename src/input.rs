//! Files attnviz reads whole go through here, so that no input can hang or exhaust it:
//!
//! - a path that is not a regular file (a FIFO, a device) is refused before it is
//!   opened: opening a FIFO blocks until someone writes to it, and a device such as
//!   `/dev/zero` never ends;
//! - a file is read up to a size limit that the caller names and justifies, and a longer
//!   one is an error naming the limit, never a read that runs the machine out of memory.

use std::fs;
use std::io::Read;
use std::path::Path;

use crate::error::{Error, Result};

/// Bytes of a JSON file of a model folder (config, tokenizer, index): Gemma 3's
/// tokenizer.json, among the largest, is 33 MB.
pub const MAX_MODEL_JSON_BYTES: u64 = 256 << 20;

/// Refuse `path` unless it is a regular file (symlinks followed).
pub fn check_regular(path: &Path) -> Result<()> {
    let meta = fs::metadata(path).map_err(|e| Error::file(path, format!("cannot open: {e}")))?;
    if meta.is_file() {
        return Ok(());
    }
    let kind = if meta.is_dir() {
        "a folder"
    } else {
        "not a regular file (a FIFO, a socket or a device)"
    };
    Err(Error::file(
        path,
        format!("is {kind}; attnviz reads model and data files from regular files"),
    ))
}

/// The bytes of the regular file `path`, refused past `limit` bytes (`what` says what
/// the limit is for).
pub fn read_limited(path: &Path, limit: u64, what: &str) -> Result<Vec<u8>> {
    check_regular(path)?;
    read_bounded(path, limit, what)
}

/// The bytes of `path` up to `limit`, whatever kind of file it is (a pipe a user gave on
/// purpose, `<(zcat corpus.gz)`), refused past `limit` bytes: `/dev/zero` ends at once.
pub fn read_bounded(path: &Path, limit: u64, what: &str) -> Result<Vec<u8>> {
    let file = fs::File::open(path).map_err(|e| Error::file(path, format!("cannot open: {e}")))?;
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| Error::file(path, format!("cannot read: {e}")))?;
    if bytes.len() as u64 > limit {
        return Err(Error::file(
            path,
            format!("is larger than {limit} bytes, the most attnviz reads for {what}"),
        ));
    }
    Ok(bytes)
}

/// [`read_limited`] as UTF-8 text.
pub fn read_text_limited(path: &Path, limit: u64, what: &str) -> Result<String> {
    String::from_utf8(read_limited(path, limit, what)?)
        .map_err(|e| Error::file(path, format!("is not UTF-8 text: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_over_the_limit_and_a_folder_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.txt");
        fs::write(&p, "12345").unwrap();
        assert_eq!(read_text_limited(&p, 5, "a test").unwrap(), "12345");
        let e = read_limited(&p, 4, "a test").unwrap_err().to_string();
        assert!(
            e.contains("larger than 4 bytes") && e.contains("a test"),
            "{e}"
        );
        let e = read_limited(dir.path(), 4, "a test")
            .unwrap_err()
            .to_string();
        assert!(e.contains("a folder"), "{e}");
    }

    #[cfg(unix)]
    #[test]
    fn a_device_is_refused_without_reading_it() {
        let e = read_limited(Path::new("/dev/zero"), 4, "a test").unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }
}
