//! The real binary in a real terminal (tmux): start, step to the softmax stage, open the
//! help, quit, and check the terminal is back in cooked mode on the main screen.
//! Skipped, with a message, where tmux is not installed.

use std::process::Command;
use std::thread::sleep;
use std::time::{Duration, Instant};

fn tmux(args: &[&str]) -> String {
    let out = Command::new("tmux").args(args).output().expect("tmux runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn have_tmux() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Wait until the pane shows `needle` (or give up after a few seconds).
fn wait_for(session: &str, needle: &str) -> String {
    let start = Instant::now();
    loop {
        let screen = tmux(&["capture-pane", "-p", "-t", session]);
        if screen.contains(needle) || start.elapsed() > Duration::from_secs(10) {
            return screen;
        }
        sleep(Duration::from_millis(100));
    }
}

struct Session(String);

impl Drop for Session {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.0])
            .output();
    }
}

#[test]
fn drive_the_app_in_tmux() {
    if !have_tmux() {
        println!("skipped: tmux is not installed, so the end-to-end test cannot drive a terminal");
        return;
    }
    let bin = env!("CARGO_BIN_EXE_attnviz");
    let name = format!("attnviz-e2e-{}", std::process::id());
    // After the app exits, print its exit code and whether the tty is cooked again.
    let script = format!(
        "{bin} --no-mouse; echo EXIT=$?; stty -a | tr ' ' '\\n' | grep -x -e icanon -e -icanon -e echo -e -echo | tr '\\n' ' '; echo TTY-CHECKED; sleep 30"
    );
    let out = Command::new("tmux")
        .args([
            "new-session",
            "-d",
            "-s",
            &name,
            "-x",
            "120",
            "-y",
            "40",
            &script,
        ])
        .output()
        .expect("tmux starts");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _session = Session(name.clone());

    let screen = wait_for(&name, "inspector");
    assert!(screen.contains("attnviz"), "{screen}");
    assert!(screen.contains("tokens"), "{screen}");

    // Step with Shift+l until the softmax stage's narration shows.
    let mut screen = String::new();
    for _ in 0..14 {
        tmux(&["send-keys", "-t", &name, "L"]);
        sleep(Duration::from_millis(150));
        screen = tmux(&["capture-pane", "-p", "-t", &name]);
        if screen.contains("Softmax turns each row") {
            break;
        }
    }
    assert!(screen.contains("Softmax turns each row"), "{screen}");
    assert!(
        screen.contains("row sum of exp"),
        "the inspector explains a weight: {screen}"
    );

    tmux(&["send-keys", "-t", &name, "?"]);
    // Wait for the overlay's later section: a capture can land while a frame is drawn.
    let screen = wait_for(&name, "Stages and heads");
    assert!(screen.contains("help: keys"), "{screen}");
    assert!(screen.contains("Stages and heads"), "{screen}");
    tmux(&["send-keys", "-t", &name, "Escape"]);
    sleep(Duration::from_millis(200));
    tmux(&["send-keys", "-t", &name, "q"]);
    let screen = wait_for(&name, "TTY-CHECKED");
    assert!(screen.contains("EXIT=0"), "{screen}");
    assert!(
        !screen.contains("inspector"),
        "the alternate screen is gone: {screen}"
    );
    assert!(
        screen.contains(" icanon") || screen.contains("icanon "),
        "{screen}"
    );
    assert!(!screen.contains("-icanon"), "raw mode is off: {screen}");
    assert!(!screen.contains("-echo"), "echo is back: {screen}");
}
