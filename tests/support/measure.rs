//! Runs attnviz as a child and measures what it took: its exit, its peak resident memory
//! and its wall time. The limit tests assert that a hostile input is refused with exit 2,
//! under [`MAX_RSS`], in seconds.
//!
//! The peak is the child's own: its VmHWM, read from /proc when it stops at its exit
//! (traced with PTRACE_O_TRACEEXIT), before its memory is released. The kernel's
//! ru_maxrss would not do: a child's counts the memory of the process it was started
//! from (this test binary) as it was when the child ran exec. Where tracing is not
//! allowed, ru_maxrss stands in, an upper bound, and the report says so.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The most memory a refused input may take: 1 GiB.
pub const MAX_RSS: u64 = 1 << 30;

/// What one run of attnviz took.
#[derive(Debug)]
pub struct Measured {
    pub args: Vec<String>,
    /// The exit code, or None if a signal ended it.
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// Peak resident set, bytes.
    pub peak_rss: u64,
    /// True if `peak_rss` is the child's own VmHWM, false if it is ru_maxrss (an upper
    /// bound that includes this test binary's memory).
    pub exact: bool,
    pub elapsed: Duration,
}

impl Measured {
    /// One line for the test's output: args, exit, peak RSS and time.
    pub fn report(&self) -> String {
        let mut args = self.args.join(" ");
        if args.chars().count() > 90 {
            args = args.chars().take(87).chain("...".chars()).collect();
        }
        format!(
            "measured: exit {} | {:.1} MB peak RSS{} | {:.2} s | attnviz {args}",
            self.code
                .map_or_else(|| format!("signal {:?}", self.signal), |c| c.to_string()),
            self.peak_rss as f64 / 1e6,
            if self.exact {
                ""
            } else {
                " (ru_maxrss, at most)"
            },
            self.elapsed.as_secs_f64(),
        )
    }
}

/// attnviz with model discovery pointed away from this machine's caches (as
/// [`super::attnviz`]).
pub fn command() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_attnviz"));
    c.env("HOME", "/nonexistent")
        .env_remove("HF_HOME")
        .env_remove("OLLAMA_MODELS")
        .env_remove("ATTNVIZ_MODELS")
        .env("ATTNVIZ_TEST_MODELS", "/nonexistent");
    c
}

/// Run `attnviz ARGS`; kill it after `timeout` (the result then says signal 9).
pub fn run(args: &[&str], timeout: Duration) -> Measured {
    use std::os::unix::process::CommandExt;
    let mut cmd = command();
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: between fork and exec the child only makes the ptrace system call (if it
    // fails, the child runs untraced and ru_maxrss stands in).
    unsafe {
        cmd.pre_exec(|| {
            libc::ptrace(
                libc::PTRACE_TRACEME,
                0,
                std::ptr::null_mut::<libc::c_void>(),
                std::ptr::null_mut::<libc::c_void>(),
            );
            Ok(())
        });
    }
    let mut child = cmd.spawn().expect("attnviz starts");
    let start = Instant::now();
    let drain = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let out = drain(child.stdout.take().map(|r| Box::new(r) as _));
    let err = drain(child.stderr.take().map(|r| Box::new(r) as _));
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let (mut killed, mut traced, mut hwm) = (false, false, None);
    let ptrace = |req: libc::c_uint, data: usize| {
        // SAFETY: a request on our own stopped tracee; `data` is passed by value.
        unsafe {
            libc::ptrace(
                req,
                pid,
                std::ptr::null_mut::<libc::c_void>(),
                data as *mut libc::c_void,
            )
        }
    };
    loop {
        // SAFETY: wait4 on our own child, with pointers to live locals.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG | libc::__WALL, &mut usage) };
        if r == pid && libc::WIFSTOPPED(status) {
            let event = (status >> 16) & 0xffff;
            let deliver = if !traced {
                // The stop after exec: ask for a stop at exit too; swallow its SIGTRAP.
                traced = true;
                ptrace(libc::PTRACE_SETOPTIONS, libc::PTRACE_O_TRACEEXIT as usize);
                0
            } else if event == libc::PTRACE_EVENT_EXIT {
                // About to exit, its memory still mapped: its own peak.
                hwm = vm_hwm(pid);
                0
            } else {
                // A signal on its way: pass it on.
                libc::WSTOPSIG(status)
            };
            ptrace(libc::PTRACE_CONT, deliver as usize);
            continue;
        }
        if r == pid {
            break;
        }
        assert!(r == 0, "wait4 failed: {}", std::io::Error::last_os_error());
        if !killed && start.elapsed() > timeout {
            // Not reaped yet, so the pid is still this child's.
            let _ = child.kill();
            killed = true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let elapsed = start.elapsed();
    let (code, signal) = if libc::WIFEXITED(status) {
        (Some(libc::WEXITSTATUS(status)), None)
    } else {
        (None, Some(libc::WTERMSIG(status)))
    };
    // Linux reports ru_maxrss in KiB.
    let exact = traced && hwm.is_some();
    let peak_rss = hwm.unwrap_or(usage.ru_maxrss as u64 * 1024);
    drop(child);
    Measured {
        args: args.iter().map(|s| s.to_string()).collect(),
        code,
        signal,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
        peak_rss,
        exact,
        elapsed,
    }
}

/// VmHWM of a live process, in bytes.
fn vm_hwm(pid: libc::pid_t) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// `attnviz ARGS` exits 2 within `secs` seconds, under [`MAX_RSS`], with every needle in
/// its message and no panic; prints what it took.
pub fn refused_within(args: &[&str], needles: &[&str], secs: u64) -> Measured {
    let m = run(args, Duration::from_secs(secs.max(1) * 4));
    eprintln!("{}", m.report());
    assert_eq!(m.code, Some(2), "{args:?}: {}\n{}", m.report(), m.stderr);
    for n in needles {
        assert!(
            m.stderr.contains(n),
            "{args:?}: message lacks {n:?}: {}",
            m.stderr
        );
    }
    assert!(!m.stderr.contains("panicked"), "{}", m.stderr);
    within(&m, secs);
    m
}

/// The run stayed under [`MAX_RSS`] and took at most `secs` seconds.
pub fn within(m: &Measured, secs: u64) {
    assert!(m.peak_rss < MAX_RSS, "{}", m.report());
    assert!(m.elapsed < Duration::from_secs(secs), "{}", m.report());
}
