//! Errors a user can cause (exit 2) and errors that are our fault (exit 1).

use std::path::PathBuf;

/// Every error attnviz reports. Variants that a user can cause name the file, flag,
/// field or shape that is wrong and say what would be right.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A bad flag value, a bad shape, a bad combination of options.
    #[error("{0}")]
    Usage(String),
    /// A file that cannot be read or holds the wrong thing.
    #[error("{}: {msg}", path.display())]
    File { path: PathBuf, msg: String },
    /// Something attnviz itself got wrong.
    #[error("internal error: {0}")]
    Internal(String),
    /// The reader of stdout closed it (`| head`): the command ends quietly, exit 0
    /// (see [`crate::output`]).
    #[error("stdout was closed")]
    StdoutClosed,
}

impl Error {
    pub fn usage(msg: impl Into<String>) -> Self {
        Error::Usage(msg.into())
    }

    pub fn file(path: impl Into<PathBuf>, msg: impl Into<String>) -> Self {
        Error::File {
            path: path.into(),
            msg: msg.into(),
        }
    }

    /// The process exit code for this error: 2 for bad input, 1 for internal errors.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Usage(_) | Error::File { .. } => 2,
            Error::Internal(_) => 1,
            Error::StdoutClosed => 0,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
