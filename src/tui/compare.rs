//! The second text of a real model's session (`--compare`, `e` in the patch view): its
//! tokens, checked to be as many as the first text's, before anything runs on it.

use crate::model::session::ModelSession;
use crate::tui::context::Compare;

/// A second text for a session: tokenized with its model's tokenizer, as many tokens as
/// the session's text, or why not (both counts and pieces).
pub fn compare_of(s: &ModelSession, text: &str) -> std::result::Result<Compare, String> {
    let ids = s.model.tokenizer.encode(text).map_err(|e| e.to_string())?;
    let pieces: Vec<String> = ids.iter().map(|&id| s.model.tokenizer.piece(id)).collect();
    if ids.len() != s.n() {
        return Err(format!(
            "the second text has {} tokens ({}) and the first {} ({}); patching needs the same number",
            ids.len(),
            pieces.join("|"),
            s.n(),
            s.pieces.join("|")
        ));
    }
    Ok(Compare {
        text: text.to_string(),
        ids,
        pieces,
        session: None,
    })
}
