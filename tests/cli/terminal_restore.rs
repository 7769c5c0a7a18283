//! The terminal is put back (raw mode off, main screen, mouse released) when the app is
//! ended from outside by SIGTERM, SIGHUP, SIGINT or SIGQUIT, and when it panics, as it is on
//! `q`.
//! Driven in a real terminal (tmux); skipped, with a message, where tmux is missing.

use std::process::Command;
use std::thread::sleep;
use std::time::{Duration, Instant};

fn tmux(args: &[&str]) -> String {
    let out = Command::new("tmux").args(args).output().expect("tmux runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

struct Session {
    name: String,
    pid_file: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.name])
            .output();
    }
}

fn have_tmux() -> bool {
    if Command::new("tmux").arg("-V").output().is_err() {
        println!("skipped: tmux is not installed, so the terminal cannot be checked");
        return false;
    }
    true
}

impl Session {
    /// The app in a tmux pane, run by a shell that reports how it ended and then stays
    /// for typing. `env` is put before the command.
    fn start(tag: &str, env: &str) -> Session {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let bin = env!("CARGO_BIN_EXE_attnviz");
        let name = format!("attnviz-restore-{tag}-{}", std::process::id());
        // The inner shell writes its pid and becomes the app (exec keeps the pid), in the
        // foreground of the pane so the app has the terminal.
        let script = format!(
            "sh -c 'echo $$ > {pid}; exec env {env} {bin}' 2>/dev/null; echo EXIT=$?; exec sh",
            pid = pid_file.display()
        );
        let started = Command::new("tmux")
            .args(["new-session", "-d", "-s", &name, "-x", "100", "-y", "30"])
            .arg(&script)
            .output()
            .expect("tmux starts");
        assert!(
            started.status.success(),
            "{}",
            String::from_utf8_lossy(&started.stderr)
        );
        Session {
            name,
            pid_file,
            _dir: dir,
        }
    }

    fn screen(&self) -> String {
        tmux(&["capture-pane", "-p", "-t", &self.name])
    }

    fn format(&self, f: &str) -> String {
        tmux(&["display", "-p", "-t", &self.name, f])
            .trim()
            .to_string()
    }

    fn wait_for(&self, what: &str, ok: impl Fn(&Session) -> bool) {
        let start = Instant::now();
        while !ok(self) {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "waited for {what}; the screen is:\n{}",
                self.screen()
            );
            sleep(Duration::from_millis(100));
        }
    }

    fn pid(&self) -> String {
        std::fs::read_to_string(&self.pid_file)
            .unwrap()
            .trim()
            .to_string()
    }

    /// The app is on screen: the alternate screen is on and its header is drawn.
    fn wait_until_running(&self) {
        self.wait_for("the app", |s| {
            s.format("#{alternate_on}") == "1" && s.screen().contains("attnviz")
        });
    }

    /// After the app ended: main screen, no mouse reporting, and typed text echoes (the
    /// line discipline is back in cooked mode).
    fn assert_restored(&self, how: &str) {
        self.wait_for("the shell after the app", |s| s.screen().contains("EXIT="));
        assert_eq!(
            self.format("#{alternate_on}"),
            "0",
            "{how}: still on the alternate screen"
        );
        assert_eq!(
            self.format("#{mouse_any_flag}"),
            "0",
            "{how}: mouse still captured"
        );
        assert_eq!(
            self.format("#{cursor_flag}"),
            "1",
            "{how}: cursor still hidden"
        );
        tmux(&["send-keys", "-t", &self.name, "-l", "echo typed-$((6*7))"]);
        tmux(&["send-keys", "-t", &self.name, "Enter"]);
        self.wait_for("typed text to echo and run", |s| {
            let screen = s.screen();
            screen.contains("echo typed-$((6*7))") && screen.contains("typed-42")
        });
    }
}

fn ends_on_signal(signal: &str, code: i32) {
    if !have_tmux() {
        return;
    }
    let s = Session::start(&signal.to_lowercase(), "");
    s.wait_until_running();
    let killed = Command::new("kill")
        .args([&format!("-{signal}"), &s.pid()])
        .status()
        .unwrap();
    assert!(killed.success());
    s.assert_restored(signal);
    // The app ends by the signal itself, so the shell sees 128 + its number.
    let screen = s.screen();
    assert!(screen.contains(&format!("EXIT={code}")), "{screen}");
}

#[test]
fn sigterm_restores_the_terminal() {
    ends_on_signal("TERM", 143);
}

#[test]
fn sighup_restores_the_terminal() {
    ends_on_signal("HUP", 129);
}

#[test]
fn sigint_from_outside_restores_the_terminal() {
    ends_on_signal("INT", 130);
}

#[test]
fn sigquit_from_outside_restores_the_terminal() {
    ends_on_signal("QUIT", 131);
}

#[test]
fn a_panic_restores_the_terminal() {
    if !have_tmux() {
        return;
    }
    let s = Session::start("panic", "ATTNVIZ_TEST_PANIC=1");
    s.assert_restored("panic");
    let screen = s.screen();
    assert!(screen.contains("EXIT=101"), "{screen}");
}

#[test]
fn q_restores_the_terminal() {
    if !have_tmux() {
        return;
    }
    let s = Session::start("quit", "");
    s.wait_until_running();
    tmux(&["send-keys", "-t", &s.name, "q"]);
    s.assert_restored("q");
    assert!(s.screen().contains("EXIT=0"));
}
