//! Every built-in scene renders each of its steps at 100x30 in both languages, headless,
//! and shows its narration whole.

use attnviz::cli::Lang;
use attnviz::record::{Headless, still};
use attnviz::scene;
use attnviz::tui::{render, views};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;

use crate::support::headless::{SIZE, options};

/// The text of the narration rows of a screen, without whitespace.
fn narration_on(screen: &Buffer) -> String {
    let region = render::regions(Rect::new(0, 0, SIZE.cols, SIZE.rows)).narration;
    let text = attnviz::record::still::text(screen);
    text.lines()
        .skip(region.y as usize)
        .take(region.height as usize)
        .collect::<String>()
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect()
}

fn squeeze(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

/// Show every step of every built-in in both languages, moving on with `advance`, and
/// return the steps whose narration is not on screen whole. A training lesson is left
/// to the tui tests (`train::every_narration_of_the_lesson_is_on_screen_whole`), which
/// play it once per language for all their checks: its run trains on the virtual clock
/// whatever `advance` does, so here it would only train it again.
fn narration_problems(advance: impl Fn(&mut Headless, usize, u64)) -> Vec<String> {
    let mut hidden = Vec::new();
    for scene in scene::builtins().unwrap() {
        if scene.train().is_some() {
            continue;
        }
        // A lesson on a trained model plays where the model is; without it, it is skipped.
        if let Some(p) = scene.pretrained()
            && attnviz::model::find::resolve(&p.model).is_err()
        {
            eprintln!(
                "skipped {}: {} is not here (tests/data/models/fetch.sh)",
                scene.name, p.model
            );
            continue;
        }
        for lang in [Lang::En, Lang::Zh] {
            let mut player = Headless::new(&scene, &options(lang), true).unwrap();
            let mut view = scene.view;
            for (k, step) in scene.steps.iter().enumerate() {
                if k > 0 {
                    advance(&mut player, k, scene.steps[k - 1].dwell_ms);
                }
                assert_eq!(
                    player.step_index(),
                    Some(k),
                    "{} step {}",
                    scene.name,
                    k + 1
                );
                let screen = player.frame().unwrap();
                assert_eq!(screen.area, Rect::new(0, 0, SIZE.cols, SIZE.rows));
                view = step.view.unwrap_or(view);
                // A view that a later piece of work brings is named by the scene; the app
                // stays where it is and says so. Otherwise the narration is all there.
                if views::find(view).is_none() {
                    continue;
                }
                let want = squeeze(step.narration.get(lang));
                let got = narration_on(&screen);
                if got != want {
                    hidden.push(format!(
                        "{} step {} {lang:?}:\n  want {want}\n  got  {got}",
                        scene.name,
                        k + 1
                    ));
                }
            }
        }
    }
    hidden
}

#[test]
fn every_step_of_every_scene_renders_in_both_languages() {
    let hidden = narration_problems(|p, k, _| p.goto(k));
    assert!(
        hidden.is_empty(),
        "narration not shown whole:\n{}",
        hidden.join("\n")
    );
}

#[test]
fn autoplay_shows_every_narration_too() {
    // The recording's path: virtual time moves the steps on.
    let hidden = narration_problems(|p, _, dwell| p.tick(dwell));
    assert!(
        hidden.is_empty(),
        "narration not shown whole:\n{}",
        hidden.join("\n")
    );
}

#[test]
fn a_still_is_the_same_as_the_step_played_to() {
    let scene = scene::builtin("causal-mask").unwrap();
    let a = still(&scene, &options(Lang::Zh), 2).unwrap();
    let mut player = Headless::new(&scene, &options(Lang::Zh), true).unwrap();
    player.tick(scene.steps[0].dwell_ms);
    assert_eq!(player.step_index(), Some(1));
    assert_eq!(player.frame().unwrap(), a);
}

#[test]
fn steps_outside_the_scene_are_refused() {
    let scene = scene::builtin("rope").unwrap();
    for k in [0, scene.steps.len() + 1] {
        let err = still(&scene, &options(Lang::En), k).unwrap_err();
        assert!(err.to_string().contains("has steps 1..="), "{err}");
        assert_eq!(err.exit_code(), 2);
    }
}
