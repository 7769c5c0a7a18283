//! `attnviz view`'s side files checked before the terminal opens: an empty tokens file is
//! an error naming it, and attention rows that are not distributions get a warning naming
//! the layer, head and row.

use assert_cmd::cargo::cargo_bin_cmd;
use predicates::prelude::PredicateBooleanExt;
use predicates::str::contains;

#[test]
fn an_empty_tokens_file_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let attn = dir.path().join("a.npy");
    ndarray_npy::write_npy(&attn, &ndarray::Array2::<f32>::eye(2)).unwrap();
    for text in ["", "\n", "  \n"] {
        let tokens = dir.path().join("empty-tokens.txt");
        std::fs::write(&tokens, text).unwrap();
        cargo_bin_cmd!("attnviz")
            .args(["view", "--attn"])
            .arg(&attn)
            .arg("--tokens-file")
            .arg(&tokens)
            .assert()
            .code(2)
            .stderr(contains("empty-tokens.txt").and(contains("empty")));
    }
}

#[test]
fn attention_rows_that_do_not_sum_to_one_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let attn = dir.path().join("logits.npy");
    // [layers 2, heads 1, 2, 2]: layer 1, head 0, row 1 sums to 3.
    let mut a = ndarray::Array4::<f32>::zeros((2, 1, 2, 2));
    for l in 0..2 {
        a[[l, 0, 0, 0]] = 1.0;
        a[[l, 0, 1, 1]] = 1.0;
    }
    a[[1, 0, 1, 0]] = 2.0;
    ndarray_npy::write_npy(&attn, &a).unwrap();
    // Without a terminal the app then refuses to start, after the warning.
    cargo_bin_cmd!("attnviz")
        .args(["view", "--attn"])
        .arg(&attn)
        .assert()
        .stderr(
            contains("warning")
                .and(contains("logits.npy"))
                .and(contains("layer 1, head 0, row 1 sums to 3")),
        );
    // Proper weights, and all-zero rows (fully masked queries), draw no warning.
    a[[1, 0, 1, 0]] = 0.0;
    a[[0, 0, 1, 1]] = 0.0;
    ndarray_npy::write_npy(&attn, &a).unwrap();
    cargo_bin_cmd!("attnviz")
        .args(["view", "--attn"])
        .arg(&attn)
        .assert()
        .stderr(contains("warning").not());
}
