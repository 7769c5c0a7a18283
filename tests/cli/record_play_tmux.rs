//! `attnviz play` in a real terminal (tmux): it autoplays a scene, Space pauses, `n`
//! steps, `]` speeds up, and q quits cleanly. Skipped, with a message, where tmux is not
//! installed.

use std::process::Command;
use std::thread::sleep;
use std::time::{Duration, Instant};

fn tmux(args: &[&str]) -> String {
    let out = Command::new("tmux").args(args).output().expect("tmux runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

struct Session(String);

impl Drop for Session {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.0])
            .output();
    }
}

impl Session {
    fn screen(&self) -> String {
        tmux(&["capture-pane", "-p", "-t", &self.0])
    }

    /// Wait until the pane shows `needle`; the screen, or a panic after 10 s.
    fn wait_for(&self, needle: &str) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if screen.contains(needle) {
                return screen;
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "waited for {needle:?}; the screen is:\n{screen}"
            );
            sleep(Duration::from_millis(100));
        }
    }

    fn keys(&self, keys: &str) {
        tmux(&["send-keys", "-t", &self.0, keys]);
    }
}

#[test]
fn play_autoplays_pauses_steps_and_quits() {
    if Command::new("tmux").arg("-V").output().is_err() {
        println!(
            "skipped: tmux is not installed, so `attnviz play` cannot be driven in a terminal"
        );
        return;
    }
    let bin = env!("CARGO_BIN_EXE_attnviz");
    let scene = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/record/short.toml"
    );
    let name = format!("attnviz-play-{}", std::process::id());
    let script = format!("{bin} play {scene} --lang zh; echo EXIT=$?; sleep 30");
    let started = Command::new("tmux")
        .args([
            "new-session",
            "-d",
            "-s",
            &name,
            "-x",
            "100",
            "-y",
            "30",
            &script,
        ])
        .output()
        .expect("tmux starts");
    assert!(
        started.status.success(),
        "{}",
        String::from_utf8_lossy(&started.stderr)
    );
    let s = Session(name);

    // Step 1 plays; pause it at once and it stays there.
    s.wait_for("分数，并高亮一个单元格。");
    s.keys("Space");
    s.wait_for("step 1/3 paused");
    sleep(Duration::from_millis(2000));
    assert!(
        s.screen().contains("分数，并高亮一个单元格。"),
        "paused for longer than the dwell"
    );

    // n steps by hand; Space plays on, and the scene reaches its last step by itself.
    s.keys("n");
    s.wait_for("权重。");
    s.keys("]");
    s.keys("Space");
    s.wait_for("两个头。");
    s.wait_for("step 3/3");

    s.keys("q");
    let screen = s.wait_for("EXIT=");
    assert!(screen.contains("EXIT=0"), "{screen}");
}
