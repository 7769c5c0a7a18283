//! A TOKEN argument (`--target`, `--foil`): one token of the model's tokenizer, written as
//! its text (" Mary") or as `#ID`.

use crate::error::{Error, Result};
use crate::model::load::LoadedModel;

/// The id of `arg` given to `flag`; exit 2 when it is several tokens (listing them), none,
/// or an id outside the vocabulary.
pub fn token_id(m: &LoadedModel, flag: &str, arg: &str) -> Result<u32> {
    let vocab = m.config.vocab;
    if let Some(num) = arg.strip_prefix('#')
        && !num.is_empty()
    {
        let id: u32 = num.parse().map_err(|_| {
            Error::usage(format!(
                "{flag} {arg:?}: after # give a token id (a whole number), e.g. #42"
            ))
        })?;
        if id as usize >= vocab {
            return Err(Error::usage(format!(
                "{flag} {arg}: token id {id} is out of range; {} has {vocab} ids (0..{})",
                m.name,
                vocab - 1
            )));
        }
        return Ok(id);
    }
    let ids = m.tokenizer.encode_plain(arg)?;
    match ids.as_slice() {
        [id] if (*id as usize) < vocab => Ok(*id),
        [] => Err(Error::usage(format!(
            "{flag} {arg:?} gives no token; give one token of the model's tokenizer (e.g. \" Paris\") or #ID"
        ))),
        many => {
            let pieces: Vec<String> = many
                .iter()
                .map(|&id| format!("{:?} (#{id})", m.tokenizer.piece(id)))
                .collect();
            Err(Error::usage(format!(
                "{flag} {arg:?} is {} tokens: {}; give one token of the model's tokenizer or #ID (e.g. {flag} #{})",
                many.len(),
                pieces.join(", "),
                many[0]
            )))
        }
    }
}
