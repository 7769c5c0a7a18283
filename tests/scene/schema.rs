//! scenes/scene.schema.json names the same fields as the serde structs that read scene
//! files, and the same view, stage and variant names as the code.

use std::collections::BTreeSet;

use serde_json::Value;

fn schema() -> Value {
    serde_json::from_str(include_str!("../../scenes/scene.schema.json")).unwrap()
}

/// The fields a serde struct accepts, from the struct itself: put an unknown key where
/// the struct is read and take the list from serde's "unknown field ..., expected ...".
fn serde_fields(toml_with_probe: &str) -> BTreeSet<String> {
    let err = toml::from_str::<attnviz::scene::raw::RawScene>(toml_with_probe)
        .expect_err("the probe key is unknown");
    let msg = err.message().to_string();
    assert!(msg.starts_with("unknown field `__probe`"), "{msg}");
    msg.split('`')
        .skip(3) // "unknown field ", "__probe", ", expected ..."
        .step_by(2)
        .map(str::to_string)
        .collect()
}

fn schema_fields(node: &Value) -> BTreeSet<String> {
    assert_eq!(
        node["additionalProperties"],
        Value::Bool(false),
        "every table refuses unknown keys, so the schema must too: {node}"
    );
    node["properties"]
        .as_object()
        .expect("properties")
        .keys()
        .cloned()
        .collect()
}

#[test]
fn the_schema_is_draft_2020_12() {
    assert_eq!(
        schema()["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
}

#[test]
fn every_table_has_the_same_fields_as_its_struct() {
    let s = schema();
    let defs = &s["$defs"];
    let cases = [
        ("root", "__probe = 0\n", &s),
        ("title", "[title]\n__probe = 0\n", &defs["text"]),
        ("model", "[model]\n__probe = 0\n", &s["properties"]["model"]),
        ("flash", "[flash]\n__probe = 0\n", &s["properties"]["flash"]),
        ("train", "[train]\n__probe = 0\n", &s["properties"]["train"]),
        ("steps", "[[steps]]\n__probe = 0\n", &defs["step"]),
        (
            "narration",
            "[[steps]]\n[steps.narration]\n__probe = 0\n",
            &defs["text"],
        ),
        (
            "animate",
            "[[steps]]\n[steps.animate]\n__probe = 0\n",
            &defs["step"]["properties"]["animate"],
        ),
    ];
    for (what, toml, node) in cases {
        assert_eq!(
            schema_fields(node),
            serde_fields(toml),
            "fields of {what} differ between the schema and the serde struct"
        );
    }
}

#[test]
fn the_schema_lists_every_view_and_stage() {
    let s = schema();
    let names = |v: &Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_str().unwrap().to_string())
            .collect()
    };
    let views: Vec<String> = attnviz::tui::ViewKind::ALL
        .iter()
        .map(|v| v.name().to_string())
        .collect();
    assert_eq!(names(&s["$defs"]["view"]["enum"]), views);
    let stages: Vec<String> = attnviz::scene::names::STAGES
        .iter()
        .map(|(n, _)| n.to_string())
        .collect();
    assert_eq!(
        names(&s["$defs"]["step"]["properties"]["stage"]["enum"]),
        stages
    );
    let variants: Vec<String> = attnviz::scene::Variant::ALL
        .iter()
        .map(|v| v.name().to_string())
        .collect();
    assert_eq!(
        names(&s["$defs"]["step"]["properties"]["variant"]["enum"]),
        variants
    );
    let passes: Vec<String> = attnviz::scene::FlashPass::ALL
        .iter()
        .map(|p| p.name().to_string())
        .collect();
    assert_eq!(
        names(&s["$defs"]["step"]["properties"]["pass"]["enum"]),
        passes
    );
}

#[test]
fn the_schema_allows_what_the_built_ins_use() {
    // A cheap structural check without a JSON Schema engine: every key a built-in uses
    // is a property of the schema at that place.
    let s = schema();
    for (name, src) in attnviz::scene::BUILTIN_SOURCES {
        let doc: toml::Table = toml::from_str(src).unwrap();
        for (k, v) in &doc {
            assert!(s["properties"].get(k).is_some(), "{name}: {k}");
            if k == "steps" {
                for step in v.as_array().unwrap() {
                    for key in step.as_table().unwrap().keys() {
                        assert!(
                            s["$defs"]["step"]["properties"].get(key).is_some(),
                            "{name}: steps.{key}"
                        );
                    }
                }
            }
        }
    }
}
