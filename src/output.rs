//! Every byte attnviz writes as a result goes through here: text to stdout, and whole
//! files. One place decides what a failed write means, so no command can forget it:
//!
//! - stdout closed by its reader (`attnviz trace | head -c 10`): the reader wanted no
//!   more, so the command ends at once and quietly, with exit code 0 ([`Error::StdoutClosed`];
//!   ripgrep and fd do the same), instead of the panic of `println!`;
//! - any other failed write (a full disk, `> /dev/full`): an error naming where the
//!   output went, exit 2;
//! - a file is written whole or not at all (a temporary file beside it, then a rename),
//!   except a path that exists and is not a regular file (`/dev/full`, `/dev/stdout`, a
//!   FIFO): that is written in place, since renaming over it would replace the device.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Write `text` to stdout and flush it.
pub fn print(text: &str) -> Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(stdout_error)
}

/// [`print`] with a newline after `text`.
pub fn println(text: &str) -> Result<()> {
    let mut line = String::with_capacity(text.len() + 1);
    line.push_str(text);
    line.push('\n');
    print(&line)
}

/// What a failed write to stdout means (see the module comment).
pub fn stdout_error(e: io::Error) -> Error {
    if e.kind() == io::ErrorKind::BrokenPipe {
        Error::StdoutClosed
    } else {
        Error::file("stdout", format!("cannot write the output: {e}"))
    }
}

/// Write `bytes` to `path`, whole or not at all (see the module comment).
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    let fail = |e: io::Error| Error::file(path, format!("cannot write: {e}"));
    if is_special(path) {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(fail)?;
        return f.write_all(bytes).and_then(|()| f.flush()).map_err(fail);
    }
    let staged = Staged::create(path)?;
    staged.write(bytes)?;
    staged.commit()
}

/// True if `path` exists and is not a regular file (a device, a FIFO, a socket).
pub fn is_special(path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|m| !m.is_file())
}

/// A file being written beside its final name; removed unless [`Staged::commit`] runs.
/// Several outputs of one command can be staged first and committed together, so a
/// failure on the second leaves no fresh first one behind.
pub struct Staged {
    target: PathBuf,
    tmp: PathBuf,
    file: Option<File>,
    committed: bool,
}

impl Staged {
    /// Create the temporary file beside `target` (same folder, so the rename is atomic).
    pub fn create(target: &Path) -> Result<Staged> {
        let name = target
            .file_name()
            .ok_or_else(|| Error::file(target, "is not a file name; give a path to a file"))?;
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".attnviz-{}.tmp", std::process::id()));
        let tmp = target.with_file_name(tmp_name);
        let file =
            File::create(&tmp).map_err(|e| Error::file(target, format!("cannot write: {e}")))?;
        Ok(Staged {
            target: target.to_path_buf(),
            tmp,
            file: Some(file),
            committed: false,
        })
    }

    /// The final path.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// The temporary path being written.
    pub fn tmp_path(&self) -> &Path {
        &self.tmp
    }

    /// Write all of `bytes` to the temporary file and flush it to the disk.
    pub fn write(&self, bytes: &[u8]) -> Result<()> {
        let fail = |e: io::Error| Error::file(&self.target, format!("cannot write: {e}"));
        let mut f = self
            .file
            .as_ref()
            .ok_or_else(|| fail(io::Error::other("closed")))?;
        f.write_all(bytes).and_then(|()| f.sync_all()).map_err(fail)
    }

    /// Rename the temporary file to the final name.
    pub fn commit(mut self) -> Result<()> {
        self.file.take();
        fs::rename(&self.tmp, &self.target)
            .map_err(|e| Error::file(&self.target, format!("cannot write: {e}")))?;
        self.committed = true;
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.committed {
            self.file.take();
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

/// A file an output will go to, opened before any output is written: staged beside its
/// final name, or (for a device or FIFO) written in place. Create every output of a
/// command first, then write them, then commit them: an output that cannot even be
/// created then leaves no other fresh output behind.
pub enum OutFile {
    Staged(Staged),
    InPlace(PathBuf),
}

impl OutFile {
    /// Open `path` for an output. A symlink is followed: its target is what is written.
    pub fn create(path: &Path) -> Result<OutFile> {
        if is_special(path) {
            return Ok(OutFile::InPlace(path.to_path_buf()));
        }
        let target = match fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_symlink() => fs::canonicalize(path).unwrap_or(path.into()),
            _ => path.to_path_buf(),
        };
        Staged::create(&target).map(OutFile::Staged)
    }

    /// Write the whole output, or its next part (to the staged file, or in place).
    pub fn write(&self, bytes: &[u8]) -> Result<()> {
        match self {
            OutFile::Staged(s) => s.write(bytes),
            OutFile::InPlace(path) => {
                let fail = |e: io::Error| Error::file(path, format!("cannot write: {e}"));
                // Append: an output written in parts (a layer at a time) follows its header.
                let mut f = fs::OpenOptions::new()
                    .append(true)
                    .open(path)
                    .map_err(fail)?;
                f.write_all(bytes).and_then(|()| f.flush()).map_err(fail)
            }
        }
    }

    /// Give the written file its final name.
    pub fn commit(self) -> Result<()> {
        match self {
            OutFile::Staged(s) => s.commit(),
            OutFile::InPlace(_) => Ok(()),
        }
    }
}

/// True if `a` and `b` are the same file: the same canonical path, or (through a hard
/// link) the same device and inode. A path that does not exist is no file: false.
pub fn same_file(a: &Path, b: &Path) -> bool {
    if let (Ok(ca), Ok(cb)) = (fs::canonicalize(a), fs::canonicalize(b))
        && ca == cb
    {
        return true;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let (Ok(ma), Ok(mb)) = (fs::metadata(a), fs::metadata(b)) {
            return ma.dev() == mb.dev() && ma.ino() == mb.ino();
        }
    }
    false
}

/// The path `p` will have once it exists: its folder made canonical, so two spellings of
/// one new file (`o.npy`, `./o.npy`) compare equal.
pub fn future_path(p: &Path) -> PathBuf {
    if let Ok(c) = fs::canonicalize(p) {
        return c;
    }
    let parent = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    match (fs::canonicalize(parent), p.file_name()) {
        (Ok(d), Some(name)) => d.join(name),
        _ => p.to_path_buf(),
    }
}

/// Refuse to write output `flag` `path` over any of `inputs` (flag, path), comparing
/// canonical paths and file identity, so a symlink or hard link to an input is caught too.
pub fn refuse_overwrite(flag: &str, path: &Path, inputs: &[(&str, &Path)]) -> Result<()> {
    for (input_flag, input) in inputs {
        if same_file(path, input) {
            return Err(Error::file(
                path,
                format!(
                    "{flag} would overwrite the input {input_flag} {} (the same file); write the output to another path",
                    input.display()
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_staged_file_that_is_not_committed_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("o.npy");
        let s = Staged::create(&target).unwrap();
        s.write(b"abc").unwrap();
        let tmp = s.tmp_path().to_path_buf();
        assert!(tmp.exists());
        drop(s);
        assert!(!tmp.exists() && !target.exists());
        write_file(&target, b"xyz").unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"xyz");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn broken_pipe_is_its_own_error() {
        let e = stdout_error(io::Error::from(io::ErrorKind::BrokenPipe));
        assert!(matches!(e, Error::StdoutClosed));
        let e = stdout_error(io::Error::from(io::ErrorKind::StorageFull));
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("stdout"), "{e}");
    }

    #[cfg(unix)]
    #[test]
    fn links_to_an_input_are_the_same_file() {
        let dir = tempfile::tempdir().unwrap();
        let q = dir.path().join("q.npy");
        fs::write(&q, b"q").unwrap();
        let sym = dir.path().join("sym.npy");
        std::os::unix::fs::symlink(&q, &sym).unwrap();
        let hard = dir.path().join("hard.npy");
        fs::hard_link(&q, &hard).unwrap();
        let other = dir.path().join("other.npy");
        fs::write(&other, b"o").unwrap();
        for p in [&q, &sym, &hard] {
            assert!(
                refuse_overwrite("--out", p, &[("--q", &q)]).is_err(),
                "{p:?}"
            );
        }
        assert!(refuse_overwrite("--out", &other, &[("--q", &q)]).is_ok());
        assert!(refuse_overwrite("--out", &dir.path().join("new.npy"), &[("--q", &q)]).is_ok());
        assert_eq!(
            future_path(&dir.path().join("./n.npy")),
            future_path(&dir.path().join("n.npy"))
        );
    }
}
