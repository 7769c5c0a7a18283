//! `attnviz lens`, `attribute` and `patch` as a person runs them, on the small Llama 3
//! checkpoint of `tests/data/models/arch`: the JSON contract's fields, the commands agreeing
//! with each other (patch's clean logit difference is attribute's total), and bad TOKEN and
//! text arguments (exit 2, naming the flag and the pieces).

use std::path::Path;

use serde_json::Value;

use crate::support::attnviz;

fn model() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/models/arch/llama3.gguf")
        .to_string_lossy()
        .into_owned()
}

fn json(args: &[&str]) -> Value {
    let out = attnviz().args(args).assert().success();
    serde_json::from_slice(&out.get_output().stdout).unwrap()
}

fn fails(args: &[&str]) -> String {
    let out = attnviz().args(args).assert().code(2);
    String::from_utf8_lossy(&out.get_output().stderr).into_owned()
}

fn f64s(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

const CLEAN: &str = "the cat sat";
const CORRUPT: &str = "the dog sat";

#[test]
fn patch_json_follows_the_contract_and_agrees_with_attribute() {
    let m = model();
    let v = json(&[
        "patch",
        &m,
        "--clean",
        CLEAN,
        "--corrupt",
        CORRUPT,
        "--target",
        "a",
        "--foil",
        "b",
        "--json",
    ]);
    assert_eq!(v["what"], "resid");
    let n = v["tokens_clean"].as_array().unwrap().len();
    assert_eq!(v["tokens_corrupt"].as_array().unwrap().len(), n);
    // "t" "he" " " then the texts differ ("c" "a" "t" / "d" "o" "g"), then agree again.
    let first_diff = (0..n)
        .find(|&i| v["tokens_clean"][i]["id"] != v["tokens_corrupt"][i]["id"])
        .unwrap();
    assert_eq!(first_diff, 3);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "one row per layer");
    for row in rows {
        let row = f64s(row);
        assert_eq!(row.len(), n);
        assert!(row[..first_diff].iter().all(|&x| x == 0.0), "{row:?}");
        assert!(row.iter().all(|x| x.is_finite()));
    }
    // The residual stream entering block 0 only differs at the changed positions.
    let row0 = f64s(&rows[0]);
    assert!(row0[6..].iter().all(|&x| x == 0.0), "{row0:?}");
    assert!(row0[3..6].iter().any(|&x| x != 0.0), "{row0:?}");
    let clean_ld = v["clean_ld"].as_f64().unwrap();
    for (text, ld) in [
        (CLEAN, clean_ld),
        (CORRUPT, v["corrupt_ld"].as_f64().unwrap()),
    ] {
        let a = json(&[
            "attribute",
            &m,
            "--text",
            text,
            "--target",
            "a",
            "--foil",
            "b",
            "--json",
        ]);
        let total = a["total"].as_f64().unwrap();
        assert!(
            (total - ld).abs() <= 1e-4 * ld.abs().max(1.0),
            "{text}: attribute total {total}, patch LD {ld}"
        );
    }
    let h = json(&[
        "patch",
        &m,
        "--clean",
        CLEAN,
        "--corrupt",
        CORRUPT,
        "--target",
        "a",
        "--foil",
        "b",
        "--what",
        "heads",
        "--json",
    ]);
    assert_eq!(h["what"], "heads");
    assert_eq!(h["clean_ld"], v["clean_ld"]);
    for row in h["rows"].as_array().unwrap() {
        assert_eq!(row.as_array().unwrap().len(), 4, "a column per head");
    }
}

#[test]
fn attribute_parts_add_up_and_the_lens_ends_at_the_models_output() {
    let m = model();
    let a = json(&[
        "attribute",
        &m,
        "--text",
        CLEAN,
        "--target",
        "#65",
        "--foil",
        "b",
        "--json",
    ]);
    assert_eq!(a["target"]["text"], "a");
    let mut sum = a["embed"].as_f64().unwrap() + a["norm_bias"].as_f64().unwrap();
    for l in a["heads"].as_array().unwrap() {
        sum += f64s(l).iter().sum::<f64>();
    }
    sum += f64s(&a["attn_bias"]).iter().sum::<f64>() + f64s(&a["mlp"]).iter().sum::<f64>();
    let total = a["total"].as_f64().unwrap();
    assert!(
        (sum - total).abs() <= 1e-3 * total.abs() + 1e-3,
        "{sum} vs {total}"
    );

    let l = json(&["lens", &m, "--text", CLEAN, "--top", "3", "--json"]);
    let n = l["tokens"].as_array().unwrap().len();
    let layers = l["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 3, "embeddings and after each of 2 blocks");
    for (i, layer) in layers.iter().enumerate() {
        assert_eq!(layer["layer"], i);
        let pos = layer["positions"].as_array().unwrap();
        assert_eq!(pos.len(), n);
        for p in pos {
            let probs: Vec<f64> = p["top"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["prob"].as_f64().unwrap())
                .collect();
            assert_eq!(probs.len(), 3);
            assert!(probs.windows(2).all(|w| w[0] >= w[1]), "{probs:?}");
            assert!(probs.iter().all(|&p| p > 0.0 && p <= 1.0));
        }
    }
    // The last layer is the model's own next-token distribution.
    let r = json(&[
        "generate",
        &m,
        "--prompt",
        CLEAN,
        "--max-tokens",
        "1",
        "--json",
    ]);
    let next = r["new_tokens"][0]["id"].clone();
    assert_eq!(layers[2]["positions"][n - 1]["top"][0]["id"], next);
}

#[test]
fn bad_texts_and_tokens_exit_2_naming_the_flag_and_the_pieces() {
    let m = model();
    let e = fails(&[
        "patch",
        &m,
        "--clean",
        CLEAN,
        "--corrupt",
        "the dog sat on",
        "--target",
        "a",
        "--foil",
        "b",
    ]);
    assert!(
        e.contains("--clean gives 9 tokens") && e.contains("--corrupt 11"),
        "{e}"
    );
    assert!(e.contains("\"d\" \"o\" \"g\""), "{e}");
    let e = fails(&[
        "patch",
        &m,
        "--clean",
        CLEAN,
        "--corrupt",
        CORRUPT,
        "--target",
        " mat",
        "--foil",
        "b",
    ]);
    assert!(e.contains("--target \" mat\" is 3 tokens"), "{e}");
    let e = fails(&["attribute", &m, "--text", CLEAN, "--target", "#999999"]);
    assert!(
        e.contains("--target #999999") && e.contains("out of range"),
        "{e}"
    );
    let e = fails(&[
        "patch",
        &m,
        "--clean",
        CLEAN,
        "--corrupt",
        CLEAN,
        "--target",
        "a",
        "--foil",
        "b",
    ]);
    assert!(e.contains("no effect"), "{e}");
}
