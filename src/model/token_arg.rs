//! TOKEN arguments (`--target`, `--foil`): one token of the model's tokenizer, written as
//! its text (`" Mary"`), or `#ID`.

use crate::error::{Error, Result};
use crate::model::tokenizer::ModelTokenizer;

/// The id that `arg` names for `flag`; text that is not exactly one token exits 2 with
/// its pieces.
pub fn token_arg(tok: &ModelTokenizer, vocab: usize, flag: &str, arg: &str) -> Result<u32> {
    if let Some(num) = arg.strip_prefix('#')
        && !num.is_empty()
        && num.bytes().all(|b| b.is_ascii_digit())
    {
        let id: u64 = num.parse().map_err(|_| {
            Error::usage(format!(
                "{flag} {arg}: #ID must be a token id below {vocab}"
            ))
        })?;
        if id >= vocab as u64 {
            return Err(Error::usage(format!(
                "{flag} {arg}: the vocabulary has {vocab} ids (0..{})",
                vocab.saturating_sub(1)
            )));
        }
        return Ok(id as u32);
    }
    let ids = tok.encode_plain(arg)?;
    match ids.as_slice() {
        [id] => Ok(*id),
        [] => Err(Error::usage(format!(
            "{flag} {arg:?} gives no token; give one token's text (e.g. \" Paris\") or #ID"
        ))),
        many => {
            let pieces: Vec<String> = many
                .iter()
                .map(|&id| format!("{:?} (#{id})", tok.piece(id)))
                .collect();
            Err(Error::usage(format!(
                "{flag} {arg:?} is {} tokens: {}; give one token's text or #ID",
                many.len(),
                pieces.join(", ")
            )))
        }
    }
}
